"""Bench-only question generators: the synthetic S1MB set as a transfer test (issue 50.5).

The four training families (``questions.families``) each speak one fixed sentence, and
the pretraining pool's ``reasoning`` register is written in those same sentences
(``families.reasoning_text``). A benchmark built from them re-scores the eval with new
slot words, so an SFT gain there only confirms the eval. The generators here are used by
``s1mb_data`` alone (``s1mb_data.bench_source: transfer``): every question sentence is a
template no training family or pool document uses, and two of the four families ask
for a skill no training family teaches:

- ``contains`` (noul): the keyword skill, paraphrased — "Does the list a, b contain the
  word x?" (training: "Is the word x in this list: a, b?");
- ``kind`` (choice): the category skill, paraphrased — "Which of these words names an
  animal?" (training: "Which one is an animal?");
- ``smallest`` (choice, held-out skill): the minimum of a few numbers (training asks for
  the largest); its many-option extension is the ``smallest-many`` subset;
- ``tally`` (score, held-out skill): count the animals or the colours in a list (training
  counts fruits only), worded "Count the animals among these words: ...".

The slot words (list words, category words, numbers) are the training vocabulary on
purpose: the tokenizer knows them, so what changes is the sentence and the skill, not
the alphabet. Levels 0–4 grow the same knobs as the training families (list length,
option count, digits). Questions are deterministic per (seed, family, level); they are
never added to ``families.FAMILIES``, so the items and the pretraining pool do not change.
"""
from __future__ import annotations

import random
from collections.abc import Callable

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_random
# `_question` and `_article` are families.py's own builders, private there until issue 51's rewrite makes them
# public (an edit to families.py reruns every stage); one definition of the question dict's shape
from decision_pipeline.questions.families import CATEGORIES, FILLER, YES_NO, _article, _question
from decision_pipeline.questions.schema import normalised_key, validate_question

__all__ = ["TRANSFER_FAMILIES", "LEVELS", "contains", "kind", "smallest", "tally", "transfer_questions"]

LEVELS = (0, 1, 2, 3, 4)
# what `tally` may count: categories whose counting no training family teaches (`count` counts fruits)
TALLY_CATEGORIES = ("animal", "color")
_PLURAL = {"animal": "animals", "color": "colors"}


def contains(rng: random.Random, level: int) -> dict:
    """noul: the keyword skill in a new sentence; lists of 2, 3, 5, 7, 9 words as in training."""
    n = (2, 3, 5, 7, 9)[level]
    words = rng.sample(FILLER, n + 1)
    target, pool = words[0], words[1:]
    present = rng.random() < 0.5
    if present:
        pool[rng.randrange(n)] = target
    trace = [f"Scan the list for {target}."]
    trace += [f"{w}: {'found' if w == target else 'different'}." for w in pool]
    trace.append(f"So the list {'contains' if present else 'does not contain'} {target}.")
    text = f"Does the list {', '.join(pool)} contain the word {target}?"
    return _question("contains", level, "noul", text, YES_NO, "true" if present else "false", trace)


def kind(rng: random.Random, level: int) -> dict:
    """choice: the category skill in a new sentence; 2, 2, 3, 3, 4 shuffled options."""
    n_options = (2, 2, 3, 3, 4)[level]
    cats = rng.sample(sorted(CATEGORIES), n_options)
    words = [rng.choice(CATEGORIES[c]) for c in cats]
    order = list(range(n_options))
    rng.shuffle(order)
    options = [{"id": f"o{i}", "text": words[j], "value": None} for i, j in enumerate(order)]
    trace = [f"{words[j]} names {_article(cats[j])}." for j in order] + [f"So the word is {words[0]}."]
    return _question("kind", level, "choice", f"Which of these words names {_article(cats[0])}?", options,
                     f"o{order.index(0)}", trace)


def smallest(rng: random.Random, level: int) -> dict:
    """choice, held-out skill: the smallest number (training asks only for the largest)."""
    n_options, hi = ((2, 9), (2, 99), (3, 99), (3, 999), (4, 999))[level]
    numbers = rng.sample(range(hi + 1), n_options)
    options = [{"id": f"o{i}", "text": str(x), "value": None} for i, x in enumerate(numbers)]
    best = min(numbers)
    trace, running = [], numbers[0]
    for x in numbers[1:]:
        winner = min(running, x)
        trace.append(f"{running} vs {x}: {winner} is smaller.")
        running = winner
    trace.append(f"The smallest is {best}.")
    return _question("smallest", level, "choice", "Of these numbers, which is the smallest?", options,
                     f"o{numbers.index(best)}", trace)


def tally(rng: random.Random, level: int) -> dict:
    """score, held-out skill: how many animals (or colours) in a list, 0..3; soft targets from level 2.

    Lengths (3, 3, 4, 5, 6) and the off-by-one annotation model are `count`'s, so the
    score task's difficulty stays comparable while the counted category and sentence change.
    """
    n = (3, 3, 4, 5, 6)[level]
    cat = rng.choice(TALLY_CATEGORIES)
    k = rng.randint(0, 3)
    items = rng.sample(CATEGORIES[cat], k) + rng.sample(FILLER, n - k)
    rng.shuffle(items)
    options = [{"id": f"v{v}", "text": str(v), "value": float(v)} for v in range(4)]
    trace, seen = [], 0
    for w in items:
        hit = w in CATEGORIES[cat]
        seen += hit
        trace.append(f"{w}: {f'{cat}, tally {seen}' if hit else 'skip'}.")
    trace.append(f"The tally is {k}.")
    target = None
    if level >= 2:
        target = {o["id"]: 0.0 for o in options}
        target[f"v{k}"] = 0.8
        neighbours = [v for v in (k - 1, k + 1) if 0 <= v <= 3]
        for v in neighbours:
            target[f"v{v}"] = 0.2 / len(neighbours)
    return _question("tally", level, "score", f"Count the {_PLURAL[cat]} among these words: {', '.join(items)}.",
                     options, f"v{k}", trace, target)


TRANSFER_FAMILIES: dict[str, Callable[[random.Random, int], dict]] = {
    "contains": contains, "kind": kind, "smallest": smallest, "tally": tally}


def transfer_questions(per_level: int, seed: int, families: tuple[str, ...] = tuple(TRANSFER_FAMILIES)) -> list[dict]:
    """`per_level` distinct questions per (family, level), ids ``<family>-L<k>-<i:05d>``.

    One rng per cell (``make_random(seed, "s1mb", "transfer", family, level)``), so a
    cell's first questions do not depend on `per_level`. Repeats (same normalised key)
    are skipped: a duplicated case would count twice in the benchmark's mean.
    """
    out: list[dict] = []
    for family in families:
        generate = TRANSFER_FAMILIES[family]
        for level in LEVELS:
            rng = make_random(seed, "s1mb", "transfer", family, level)
            seen: set[str] = set()
            for _ in range(per_level * 50):
                if len(seen) == per_level:
                    break
                q = generate(rng, level)
                key = normalised_key(q)
                if key in seen:
                    continue
                seen.add(key)
                q["id"] = f"{family}-L{level}-{len(seen) - 1:05d}"
                out.append(validate_question(q, q["id"]))
            if len(seen) < per_level:
                raise PipelineError(f"params.yaml: s1mb_data.transfer_per_level {per_level} is more than the "
                                    f"{len(seen)} distinct {family} questions level {level} has; lower it")
    return out

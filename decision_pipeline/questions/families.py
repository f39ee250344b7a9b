"""Procedural decision families with verifiable answers and solver-written traces.

Each family makes questions at difficulty levels 0–4 from an explicit seeded
generator. Levels grow the search space (longer lists, more options, bigger
numbers) so the lowest levels are learnable by the tiny CPU model and the top
ones are not: a trained model has room to beat its base, and thinking has room
to beat the readout. Families cover all three S1MB task types.
"""
from __future__ import annotations

import random
from typing import Callable

CATEGORIES = {
    "color": ["red", "blue", "green", "yellow", "purple", "orange", "brown", "pink", "gray", "white"],
    "animal": ["cat", "dog", "horse", "mouse", "tiger", "rabbit", "sheep", "goat", "wolf", "bear"],
    "fruit": ["apple", "pear", "plum", "grape", "lemon", "mango", "peach", "cherry", "melon", "banana"],
    "tool": ["hammer", "saw", "drill", "wrench", "chisel", "shovel", "rake", "axe", "file", "clamp"],
    "city": ["paris", "rome", "oslo", "lima", "cairo", "delhi", "tokyo", "madrid", "vienna", "dublin"],
}
FILLER = ["stone", "river", "cloud", "table", "paper", "window", "garden", "bridge", "candle", "ladder",
          "mirror", "basket", "pillow", "rocket", "silver", "forest", "market", "letter", "jacket", "pocket"]
YES_NO = [{"id": "true", "text": "yes", "value": None}, {"id": "false", "text": "no", "value": None}]


def _question(family: str, level: int, task: str, text: str, options: list[dict], gold: str,
              trace: list[str], target: dict | None = None) -> dict:
    return {"family": family, "level": level, "task": task, "question": text, "options": options,
            "gold": gold, "target": target or {o["id"]: float(o["id"] == gold) for o in options},
            "trace": "\n".join(trace)}


def keyword(rng: random.Random, level: int) -> dict:
    """noul: does a word occur in a list? Levels lengthen the list (2, 3, 5, 7, 9 words)."""
    n = (2, 3, 5, 7, 9)[level]
    words = rng.sample(FILLER, n + 1)
    target, pool = words[0], words[1:]
    present = rng.random() < 0.5
    if present:
        pool[rng.randrange(n)] = target
    trace = [f"Look for {target}."]
    trace += [f"{w}: {'match' if w == target else 'no'}." for w in pool]
    trace.append(f"So {target} is {'in' if present else 'not in'} the list.")
    text = f"Is the word {target} in this list: {', '.join(pool)}?"
    return _question("keyword", level, "noul", text, YES_NO, "true" if present else "false", trace)


def category(rng: random.Random, level: int) -> dict:
    """choice: which option belongs to a named category? Levels add options (2–4).

    Options are shuffled at every level: with the gold always first, a readout that
    always says A would score 100% on a level and look like knowledge."""
    n_options = (2, 2, 3, 3, 4)[level]
    cats = rng.sample(sorted(CATEGORIES), n_options)
    words = [rng.choice(CATEGORIES[c]) for c in cats]
    order = list(range(n_options))
    rng.shuffle(order)
    options = [{"id": f"o{i}", "text": words[j], "value": None} for i, j in enumerate(order)]
    gold = f"o{order.index(0)}"
    trace = [f"{words[j]} is {_article(cats[j])}." for j in order] + [f"The {cats[0]} is {words[0]}."]
    return _question("category", level, "choice", f"Which one is {_article(cats[0])}?", options, gold, trace)


def _article(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def larger(rng: random.Random, level: int) -> dict:
    """choice: the largest number. Levels grow digits and option count."""
    n_options, hi = ((2, 9), (2, 99), (3, 99), (3, 999), (4, 999))[level]
    numbers = rng.sample(range(hi + 1), n_options)
    options = [{"id": f"o{i}", "text": str(x), "value": None} for i, x in enumerate(numbers)]
    best = max(numbers)
    trace, running = [], numbers[0]
    for x in numbers[1:]:
        winner = max(running, x)
        trace.append(f"{running} vs {x}: {winner} is larger.")
        running = winner
    trace.append(f"The largest is {best}.")
    return _question("larger", level, "choice", "Which number is the largest?", options,
                     f"o{numbers.index(best)}", trace)


def count(rng: random.Random, level: int) -> dict:
    """score: how many fruits in a list (values 0..3)? Soft targets from level 2 on."""
    n = (3, 3, 4, 5, 6)[level]
    k = rng.randint(0, 3)
    fruits = rng.sample(CATEGORIES["fruit"], k)
    others = rng.sample(FILLER, n - k)
    items = fruits + others
    rng.shuffle(items)
    options = [{"id": f"v{v}", "text": str(v), "value": float(v)} for v in range(4)]
    trace, seen = [], 0
    for w in items:
        is_fruit = w in CATEGORIES["fruit"]
        seen += is_fruit
        trace.append(f"{w}: {'fruit, count ' + str(seen) if is_fruit else 'not a fruit'}.")
    trace.append(f"There are {k} fruits.")
    target = None
    if level >= 2:  # soft target: annotators off by one some of the time
        target = {o["id"]: 0.0 for o in options}
        target[f"v{k}"] = 0.8
        neighbours = [v for v in (k - 1, k + 1) if 0 <= v <= 3]
        for v in neighbours:
            target[f"v{v}"] = 0.2 / len(neighbours)
    return _question("count", level, "score", f"How many fruits are in this list: {', '.join(items)}?",
                     options, f"v{k}", trace, target)


FAMILIES: dict[str, Callable[[random.Random, int], dict]] = {
    "keyword": keyword, "category": category, "larger": larger, "count": count}


def generate(family: str, level: int, rng: random.Random) -> dict:
    if family not in FAMILIES:
        raise KeyError(family)
    return FAMILIES[family](rng, level)


def reasoning_text(rng: random.Random) -> str:
    """A document in the question language (question, options and worked trace).

    Used as the `reasoning` register of the pretraining pool, so curation can
    favour text that teaches the base model the decision questions' language.
    """
    q = generate(rng.choice(sorted(FAMILIES)), rng.randrange(5), rng)
    opts = "; ".join(o["text"] for o in q["options"])
    answer = next(o["text"] for o in q["options"] if o["id"] == q["gold"])
    return f"{q['question']} Options: {opts}.\n{q['trace']}\nThe answer is {answer}."

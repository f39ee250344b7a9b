"""The synthetic S1MB bench measures transfer (issue 50.5): no bench question is written in a sentence
the training families or the pretraining pool use.

A question's *template* is its text with the slot words masked: numbers -> <N>, category nouns
(with their article) -> <C>, list and option words -> <W>, and a comma-separated run of slots ->
<LIST>. The default bench (`bench_source: transfer`) must share no template with any
`questions.families` generator at any level, no template may occur inside the pool's `reasoning`
register (`families.reasoning_text`), no four-token run of a bench template may occur in a training
template (a paraphrase, not a re-wording of one slot), and some bench family must be new by name.
The same checks run on the old path (`bench_source: items`) and must fail there: the check has teeth.

Why: a benchmark in the training sentences only re-scores the eval on unseen slot words; an SFT
gain on it says nothing about transfer.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.io import write_table
from decision_pipeline.questions.families import CATEGORIES, FAMILIES, FILLER, generate, reasoning_text
from decision_pipeline.questions.schema import QUESTION_SCHEMA, to_row
from decision_pipeline.questions.splits import build_questions

SEEDS_PER_LEVEL = 300
POOL_DOCS = 3000
_NOUNS = {n for c in CATEGORIES for n in (c, c + "s", c + "es")} | {"cities"}
_SLOT_WORDS = set(FILLER) | {w for words in CATEGORIES.values() for w in words}
_CAT = re.compile(r"\b(?:(?:a|an) )?(?:" + "|".join(sorted(_NOUNS, key=len, reverse=True)) + r")\b")
_WORD = re.compile(r"\b(?:" + "|".join(sorted(_SLOT_WORDS, key=len, reverse=True)) + r")\b")
_LIST = re.compile(r"<[NW]>(?:, <[NW]>)+")


def template(text: str) -> str:
    """The text with its slot words masked (see the module docstring)."""
    text = " ".join(text.lower().split())
    text = re.sub(r"\b\d+\b", "<N>", text)
    text = _CAT.sub("<C>", text)
    text = _WORD.sub("<W>", text)
    return _LIST.sub("<LIST>", text)


def _tokens(tpl: str) -> list[str]:
    return re.findall(r"<\w+>|\w+|[^\w\s]", tpl)


def _grams(tpl: str, n: int = 4) -> set[tuple[str, ...]]:
    toks = _tokens(tpl)
    return {tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)}


@pytest.fixture(scope="module")
def training_templates() -> set[str]:
    """Every template the training families write, at every level, over many seeds."""
    out = set()
    for family in FAMILIES:
        for level in range(5):
            rng = random.Random(f"{family}-{level}")
            out |= {template(generate(family, level, rng)["question"]) for _ in range(SEEDS_PER_LEVEL)}
    return out


@pytest.fixture(scope="module")
def pool_text() -> str:
    """The pretraining pool's reasoning register (question, options and trace), masked, one document a line."""
    rng = random.Random(50)
    return "\n".join(template(reasoning_text(rng)).replace("\n", " ") for _ in range(POOL_DOCS))


def _bench(tmp: Path, bench_source: str) -> tuple[dict[str, set[str]], dict]:
    """{family: templates} of the benchmark cases the s1mb_data stage writes with `bench_source`."""
    from stages import s1mb_data
    questions = build_questions(list(FAMILIES), [0, 1, 2, 3, 4], 20, seed=3)
    write_table(tmp / "items.parquet", [to_row(q, "bench") for q in questions], QUESTION_SCHEMA)
    params = {"base": {"seed": 3, "profile": "default"},
              "s1mb_data": {"source": "synthetic", "bench_source": bench_source, "transfer_per_level": 20,
                            "category": "synthetic-v1", "local_dir": "configs/external/none", "revision": "",
                            "max_cases": 200, "many_options": 12}}
    (tmp / "params.yaml").write_text(yaml.safe_dump(params))
    assert s1mb_data.main(["--params", str(tmp / "params.yaml"), "--items", str(tmp / "items.parquet"),
                           "--out", str(tmp / "bench"), "--metrics", str(tmp / "m.json")]) == 0
    out: dict[str, set[str]] = {}
    for f in sorted((tmp / "bench" / "datasets").rglob("data.jsonl")):
        for line in f.read_text().splitlines():
            case = json.loads(line)
            text = json.loads(case["input"]["decisions"][0]["instructions_json"])
            out.setdefault(case["group_id"].rsplit("-L", 1)[0], set()).add(template(text))
    return out, json.loads((tmp / "m.json").read_text())


def _overlaps(bench: dict[str, set[str]], training: set[str], pool: str) -> dict[str, list[str]]:
    """What ties the bench to training text: equal templates, templates inside the pool, shared 4-grams."""
    training_grams = set().union(*(_grams(t) for t in training))
    found: dict[str, list[str]] = {"equal": [], "in_pool": [], "four_gram": [], "known_family": []}
    for family, templates in sorted(bench.items()):
        if family.removesuffix("-many") in FAMILIES:
            found["known_family"].append(family)
        for tpl in sorted(templates):
            if tpl in training:
                found["equal"].append(tpl)
            if tpl in pool:
                found["in_pool"].append(tpl)
            if _grams(tpl) & training_grams:
                found["four_gram"].append(tpl)
    return found


def test_the_mask_finds_the_training_templates(training_templates):
    """One template per family, whatever the level: the mask removes every slot and nothing else."""
    assert training_templates == {"is the word <W> in this list: <LIST>?", "which one is <C>?",
                                  "which number is the largest?", "how many <C> are in this list: <LIST>?"}


def test_default_bench_shares_no_template_with_training_or_the_pool(tmp_path, training_templates, pool_text):
    bench, metrics = _bench(tmp_path, "transfer")
    assert metrics["bench_source"] == "transfer"
    assert set(bench) == {"contains", "kind", "smallest", "smallest-many", "tally"}
    assert all(len(t) == 1 for t in bench.values()), bench  # one sentence per family, slots masked
    found = _overlaps(bench, training_templates, pool_text)
    assert found == {"equal": [], "in_pool": [], "four_gram": [], "known_family": []}, found
    # at least one family asks for a skill no training family has, by name
    assert set(bench) - set(FAMILIES) and {"smallest", "tally"} <= set(bench)


def test_the_items_bench_fails_the_same_check(tmp_path, training_templates, pool_text):
    """The old path (`bench_source: items`): every bench template is a training template, sits in the
    pool and is a training family; the check above would fail on it."""
    bench, metrics = _bench(tmp_path, "items")
    assert metrics["bench_source"] == "items" and metrics["items_split"] == "bench"
    found = _overlaps(bench, training_templates, pool_text)
    templates = set().union(*bench.values())
    assert set(found["equal"]) == set(found["in_pool"]) == templates == training_templates
    assert sorted(found["known_family"]) == sorted(bench) and not set(bench) - set(FAMILIES) - {"larger-many"}

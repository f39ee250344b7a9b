"""The bench-only transfer generators (issue 50.5): hand-checked questions at one level each, their
invariants at every level, determinism, the `bench_source` param, and the adapter's view of a
transfer case (the model sees exactly the generated question)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from decision_pipeline.bench import synthetic, transfer
from decision_pipeline.bench.adapter import to_pipeline_question
from decision_pipeline.bench.data import S1mbDataParams
from decision_pipeline.bench.s1mb import load_benchmarks, load_cases, load_category
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import load_section
from decision_pipeline.questions.families import CATEGORIES, FAMILIES
from decision_pipeline.questions.schema import user_message

YES_NO = [{"id": "true", "text": "yes", "value": None}, {"id": "false", "text": "no", "value": None}]
SCORES = [{"id": f"v{v}", "text": str(v), "value": float(v)} for v in range(4)]


# ---------------------------------------------------------------- hand-computed, one level each

def test_contains_level_1_by_hand():
    # seed 3: target "bridge", list of 3 (level 1) with the target at the end -> yes
    q = transfer.contains(random.Random(3), 1)
    assert q == {"family": "contains", "level": 1, "task": "noul",
                 "question": "Does the list jacket, letter, bridge contain the word bridge?",
                 "options": YES_NO, "gold": "true", "target": {"true": 1.0, "false": 0.0},
                 "trace": "Scan the list for bridge.\njacket: different.\nletter: different.\nbridge: found.\n"
                          "So the list contains bridge."}
    # seed 0: "pillow" is not among rocket, river, candle -> no
    q = transfer.contains(random.Random(0), 1)
    assert q["question"] == "Does the list rocket, river, candle contain the word pillow?"
    assert (q["gold"], q["target"]) == ("false", {"true": 0.0, "false": 1.0})
    assert q["trace"].endswith("So the list does not contain pillow.")


def test_kind_level_2_by_hand():
    # seed 2: three categories (level 2), asked for an animal; rabbit is the animal, shown as B (o1)
    q = transfer.kind(random.Random(2), 2)
    assert q == {"family": "kind", "level": 2, "task": "choice",
                 "question": "Which of these words names an animal?",
                 "options": [{"id": "o0", "text": "lemon", "value": None},
                             {"id": "o1", "text": "rabbit", "value": None},
                             {"id": "o2", "text": "drill", "value": None}],
                 "gold": "o1", "target": {"o0": 0.0, "o1": 1.0, "o2": 0.0},
                 "trace": "lemon names a fruit.\nrabbit names an animal.\ndrill names a tool.\nSo the word is rabbit."}


def test_smallest_level_3_by_hand():
    # seed 0: 864, 394, 776 (three numbers up to 999): the smallest is 394 = o1
    q = transfer.smallest(random.Random(0), 3)
    assert q == {"family": "smallest", "level": 3, "task": "choice",
                 "question": "Of these numbers, which is the smallest?",
                 "options": [{"id": "o0", "text": "864", "value": None}, {"id": "o1", "text": "394", "value": None},
                             {"id": "o2", "text": "776", "value": None}],
                 "gold": "o1", "target": {"o0": 0.0, "o1": 1.0, "o2": 0.0},
                 "trace": "864 vs 394: 394 is smaller.\n394 vs 776: 394 is smaller.\nThe smallest is 394."}


def test_tally_level_2_by_hand_with_soft_targets():
    # seed 3: one animal (rabbit) among four words; level 2 spreads 0.2 over both neighbours of 1
    q = transfer.tally(random.Random(3), 2)
    assert q == {"family": "tally", "level": 2, "task": "score",
                 "question": "Count the animals among these words: cloud, forest, pocket, rabbit.",
                 "options": SCORES, "gold": "v1", "target": {"v0": 0.1, "v1": 0.8, "v2": 0.1, "v3": 0.0},
                 "trace": "cloud: skip.\nforest: skip.\npocket: skip.\nrabbit: animal, tally 1.\nThe tally is 1."}
    # seed 0: red, purple and pink are colours -> 3, whose only neighbour 2 takes the whole 0.2
    q = transfer.tally(random.Random(0), 2)
    assert q["question"] == "Count the colors among these words: red, pillow, purple, pink."
    assert (q["gold"], q["target"]) == ("v3", {"v0": 0.0, "v1": 0.0, "v2": 0.2, "v3": 0.8})


# ---------------------------------------------------------------- invariants at every level

def _words(text: str) -> list[str]:
    return [w.strip(" .?") for w in text.split(": ", 1)[1].split(",")]


@pytest.mark.parametrize("level", transfer.LEVELS)
def test_every_generator_answers_its_own_question_at_every_level(level):
    rng = random.Random(level)
    for _ in range(50):
        q = transfer.contains(rng, level)
        listed = q["question"].removeprefix("Does the list ").split(" contain the word ")
        assert len(listed[0].split(", ")) == (2, 3, 5, 7, 9)[level]
        assert q["gold"] == ("true" if listed[1].rstrip("?") in listed[0].split(", ") else "false")
        q = transfer.kind(rng, level)
        asked = q["question"].rsplit(" ", 1)[1].rstrip("?")
        assert [o["id"] for o in q["options"] if o["text"] in CATEGORIES[asked]] == [q["gold"]]
        assert len(q["options"]) == (2, 2, 3, 3, 4)[level]
        q = transfer.smallest(rng, level)
        numbers = [int(o["text"]) for o in q["options"]]
        assert q["options"][numbers.index(min(numbers))]["id"] == q["gold"] and len(set(numbers)) == len(numbers)
        q = transfer.tally(rng, level)
        plural = q["question"].split()[2]
        cat = {"animals": "animal", "colors": "color"}[plural]
        k = sum(w in CATEGORIES[cat] for w in _words(q["question"]))
        assert q["gold"] == f"v{k}" and abs(sum(q["target"].values()) - 1) < 1e-9
        assert max(q["target"], key=q["target"].get) == q["gold"]
        assert (q["target"][q["gold"]] == 1.0) == (level < 2)


def test_transfer_questions_are_distinct_deterministic_and_prefix_stable():
    qs = transfer.transfer_questions(6, seed=11)
    assert len(qs) == 6 * len(transfer.LEVELS) * len(transfer.TRANSFER_FAMILIES)
    assert len({q["id"] for q in qs}) == len(qs)
    assert qs == transfer.transfer_questions(6, seed=11)
    assert qs != transfer.transfer_questions(6, seed=12)
    # a cell's first questions do not depend on how many are asked for
    more = {q["id"]: q for q in transfer.transfer_questions(9, seed=11)}
    assert all(more[q["id"]] == q for q in qs)
    assert not set(transfer.TRANSFER_FAMILIES) & set(FAMILIES)


def test_too_many_per_level_is_one_line_naming_the_param():
    # level 0 of `smallest` has only 45 distinct pairs of 0..9
    with pytest.raises(PipelineError, match=r"s1mb_data\.transfer_per_level 50 .* smallest .* level 0"):
        transfer.transfer_questions(50, seed=1, families=("smallest",))


# ---------------------------------------------------------------- stage, params and adapter

def _params(tmp: Path, **data) -> Path:
    doc = {"base": {"seed": 7, "profile": "default"},
           "s1mb_data": {"source": "synthetic", "bench_source": "transfer", "transfer_per_level": 3,
                         "category": "synthetic-v1", "local_dir": "configs/external/none", "revision": "",
                         "max_cases": 12, "many_options": 12, **data}}
    path = tmp / "params.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def transfer_bench(tmp_path_factory) -> Path:
    """The default (transfer) synthetic set written by the stage; the items file is not read."""
    from stages import s1mb_data
    tmp = tmp_path_factory.mktemp("transfer")
    assert s1mb_data.main(["--params", str(_params(tmp)), "--items", str(tmp / "absent.parquet"),
                           "--out", str(tmp / "bench"), "--metrics", str(tmp / "m.json")]) == 0
    return tmp / "bench"


def test_stage_writes_the_transfer_benchmarks(transfer_bench):
    definitions = load_benchmarks(transfer_bench / "benchmarks")
    category = load_category(transfer_bench / "categories" / "synthetic-v1.json", definitions)
    assert sorted(category.benchmarks) == ["contains-noul-test-v1", "kind-choice-test-v1",
                                           "smallest-choice-test-v1", "smallest-many-choice-test-v1",
                                           "tally-score-test-v1"]
    for bid in category.benchmarks:
        assert definitions[bid].case_count == 12  # 3 per level x 5 levels, capped by max_cases
        cases = load_cases(transfer_bench, definitions[bid])
        if bid.startswith("smallest-many"):
            assert all(len(c.questions[0].options) == 12 for c in cases)
    metrics = json.loads((transfer_bench.parent / "m.json").read_text())
    assert metrics["bench_source"] == "transfer" and "items_split" not in metrics
    assert metrics["n_cases"] == 60


def test_the_model_is_shown_the_generated_question(transfer_bench):
    """The adapter turns a transfer row back into the generated question, so the prompt
    (`user_message`, what decision/prompts.py renders) and the gold are the generator's."""
    generated = {q["id"]: q for q in transfer.transfer_questions(3, seed=7)}
    definitions = load_benchmarks(transfer_bench / "benchmarks")
    seen = 0
    for bid in ("contains-noul-test-v1", "kind-choice-test-v1", "smallest-choice-test-v1", "tally-score-test-v1"):
        for case in load_cases(transfer_bench, definitions[bid]):
            original = generated[case.case_id]
            q = to_pipeline_question(case, case.questions[0])
            assert user_message(q) == user_message(original)
            assert q["gold"] == original["gold"] and q["target"] == original["target"]
            seen += 1
    assert seen == 48


def test_smallest_many_keeps_the_minimum_as_gold():
    q = transfer.smallest(random.Random(0), 3)
    q["id"] = "smallest-L3-00000"
    many = synthetic.many_question(q, 12, seed=5, subset=synthetic.SMALLEST_MANY)
    numbers = [int(o["text"]) for o in many["options"]]
    assert len(set(numbers)) == 12 and {864, 394, 776} <= set(numbers)
    assert many["gold"] == f"o{numbers.index(min(numbers))}" and many["family"] == "smallest-many"
    assert many["question"] == q["question"] and many["id"] == "smallest-L3-00000-x12"


@pytest.mark.parametrize("field,value,match", [
    ("bench_source", "eval", r"s1mb_data\.bench_source"),
    ("transfer_per_level", 0, r"s1mb_data\.transfer_per_level"),
    ("transfer_per_level", 41, r"s1mb_data\.transfer_per_level"),
])
def test_bad_transfer_params_name_the_key(tmp_path, field, value, match):
    with pytest.raises(PipelineError, match=match):
        load_section(S1mbDataParams, "s1mb_data", _params(tmp_path, **{field: value}))


def test_bad_bench_source_is_one_line_and_exit_2(tmp_path, capsys):
    from stages import s1mb_data
    rc = s1mb_data.main(["--params", str(_params(tmp_path, bench_source="eval")), "--items", "x.parquet",
                         "--out", str(tmp_path / "bench"), "--metrics", str(tmp_path / "m.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "s1mb_data.bench_source" in err[0], err

"""The synthetic S1MB benchmarks share no question with the items (issue 35.4): with `bench_source:
items` they come from the items' own `bench` split, and on the data the default and micro profiles
generate no benchmark case shares a question id or a normalised key with any other split; with the
default `bench_source: transfer` (issue 50.5) no case shares a normalised key with any item at all.
Every benchmark keeps enough cases for its CI to mean something."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from decision_pipeline.bench.data import ITEMS_SPLIT
from decision_pipeline.common.io import write_table
from decision_pipeline.common.params import from_dict
from decision_pipeline.common.profiles import merged_profile
from decision_pipeline.questions.splits import BENCH_SPLIT, HELD_OUT_SPLITS, SPLITS, ItemsParams, build_items
from decision_pipeline.questions.schema import QUESTION_SCHEMA, from_row, normalised_key

ROOT = Path(__file__).resolve().parents[2]
# the fewest cases a family benchmark of the default profile may hold: ~±0.11 on an accuracy near 0.5
DEFAULT_MIN_CASES = 60


def test_the_stage_reads_the_split_the_items_stage_names():
    assert ITEMS_SPLIT == BENCH_SPLIT and BENCH_SPLIT in SPLITS and BENCH_SPLIT in HELD_OUT_SPLITS
    assert "pool" not in HELD_OUT_SPLITS


def _bench_rows(profile: str, tmp: Path, bench_source: str = "items") -> tuple[list[dict], list[dict], dict]:
    """The profile's items (as the items stage builds them) and the rows s1mb_data writes with `bench_source`."""
    from stages import s1mb_data
    params = merged_profile(profile, ROOT)
    params["s1mb_data"]["bench_source"] = bench_source
    p = from_dict(ItemsParams, params["items"], f"{profile} profile: items")
    rows, _ = build_items(p, params["base"]["seed"] + p.seed_offset)
    write_table(tmp / "items.parquet", rows, QUESTION_SCHEMA)
    (tmp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert s1mb_data.main(["--params", str(tmp / "params.yaml"), "--items", str(tmp / "items.parquet"),
                           "--out", str(tmp / "bench"), "--metrics", str(tmp / "m.json")]) == 0
    cases = [json.loads(line) for f in sorted((tmp / "bench" / "datasets").rglob("data.jsonl"))
             for line in f.read_text().splitlines()]
    return [from_row(r) | {"split": r["split"]} for r in rows], cases, json.loads((tmp / "m.json").read_text())


def _as_question(case: dict) -> dict:
    """The question a model is shown for a case: its instructions and its options' texts."""
    decision = case["input"]["decisions"][0]
    return {"question": json.loads(decision["instructions_json"]),
            "options": [{"text": json.loads(c["description_json"])} for c in decision["criteria"]]}


@pytest.mark.parametrize("profile", ["default", "micro"])
def test_benchmarks_share_no_id_or_key_with_any_other_split(profile, tmp_path):
    items, cases, metrics = _bench_rows(profile, tmp_path)
    assert metrics["items_split"] == BENCH_SPLIT and metrics["n_cases"] == len(cases) > 0
    bench = {q["id"]: q for q in items if q["split"] == BENCH_SPLIT}
    others = [q for q in items if q["split"] != BENCH_SPLIT]
    other_ids, other_keys = {q["id"] for q in others}, {normalised_key(q) for q in others}
    for case in cases:
        base_id = case["case_id"].split("-x")[0]  # a many-option case extends the bench question it is named after
        assert base_id in bench, case["case_id"]
        assert case["case_id"] not in other_ids and base_id not in other_ids
        assert normalised_key(_as_question(case)) not in other_keys, case["case_id"]
        assert normalised_key(bench[base_id]) not in other_keys, base_id
    # every family benchmark is there, so all three task types are scored
    families = Counter(case["group_id"].rsplit("-L", 1)[0] for case in cases)
    assert {"keyword", "category", "larger", "count", "larger-many"} <= set(families)
    if profile == "default":
        assert min(families.values()) >= DEFAULT_MIN_CASES, families


@pytest.mark.parametrize("profile", ["default", "micro"])
def test_transfer_benchmarks_share_no_id_or_key_with_any_item(profile, tmp_path):
    assert merged_profile(profile, ROOT)["s1mb_data"]["bench_source"] == "transfer"  # the default
    items, cases, metrics = _bench_rows(profile, tmp_path, "transfer")
    assert metrics["bench_source"] == "transfer" and metrics["n_cases"] == len(cases) > 0
    item_ids, item_keys = {q["id"] for q in items}, {normalised_key(q) for q in items}
    for case in cases:
        assert case["case_id"] not in item_ids and normalised_key(_as_question(case)) not in item_keys
    families = Counter(case["group_id"].rsplit("-L", 1)[0] for case in cases)
    assert set(families) == {"contains", "kind", "smallest", "tally", "smallest-many"}
    if profile == "default":
        assert min(families.values()) >= DEFAULT_MIN_CASES, families


def test_no_bench_split_is_one_line_naming_the_key(tmp_path, capsys):
    from stages import s1mb_data
    params = merged_profile("micro", ROOT)
    params["s1mb_data"]["bench_source"] = "items"
    p = from_dict(ItemsParams, params["items"], "micro profile: items")
    rows, _ = build_items(p, 1)
    write_table(tmp_path / "items.parquet", [r | {"split": "eval"} if r["split"] == BENCH_SPLIT else r for r in rows],
                QUESTION_SCHEMA)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert s1mb_data.main(["--params", str(tmp_path / "params.yaml"), "--items", str(tmp_path / "items.parquet"),
                           "--out", str(tmp_path / "bench"), "--metrics", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no questions in split 'bench'" in err[0] and "items.splits.bench" in err[0]
    assert not (tmp_path / "bench").exists() and not (tmp_path / "m.json").exists()

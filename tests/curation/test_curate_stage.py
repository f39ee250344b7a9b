"""The curate stage end to end on a small generated pool with the real tokenizer: exact budget,
per-list metrics, no fallback at a sufficient depth; bad rule params exit 2 with one line, nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from decision_pipeline.common.io import read_json, write_table
from decision_pipeline.common.params import from_dict
from decision_pipeline.curation.documents import DEV_SCHEMA, POOL_SCHEMA, REGISTERS, generate_dev, generate_pool
from decision_pipeline.questions.splits import ItemsParams, build_items
from decision_pipeline.questions.schema import QUESTION_SCHEMA
from decision_pipeline.common.profiles import merged_profile

ROOT = Path(__file__).resolve().parents[2]
MICRO = merged_profile("micro", ROOT)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("curate_stage")
    rows, _ = build_items(from_dict(ItemsParams, MICRO["items"], "items"), MICRO["base"]["seed"])
    write_table(root / "items.parquet", rows, QUESTION_SCHEMA)
    pool = generate_pool(400, 0.3, np.random.default_rng(7))
    names = set(POOL_SCHEMA.names)
    write_table(root / "pool.parquet", [{"meta_json": "{}", **{k: v for k, v in d.items() if k in names}}
                                         for d in pool], POOL_SCHEMA)
    dev = generate_dev(10, REGISTERS, np.random.default_rng(8), avoid_texts=[d["text"] for d in pool])
    write_table(root / "dev.parquet", [{k: d[k] for k in DEV_SCHEMA.names} for d in dev], DEV_SCHEMA)
    return root


def _run(root: Path, tiny_dir: str, changes: dict, capsys, tag: str):
    from stages.curate import main
    data = json.loads(json.dumps(MICRO))
    data["curate"].update({"registers": list(REGISTERS), **changes})  # the generator has no reasoning docs
    params = root / f"params_{tag}.yaml"
    params.write_text(yaml.safe_dump(data))
    out = root / tag
    capsys.readouterr()
    rc = main(["curated", "--params", str(params), "--pool", str(root / "pool.parquet"), "--dev",
               str(root / "dev.parquet"), "--tokenizer", tiny_dir, "--items", str(root / "items.parquet"),
               "--out", str(out / "sel"), "--metrics", str(out / "m.json")])
    return rc, capsys.readouterr().err, out


def test_stage_exact_budget_and_list_metrics(files, tiny_dir, capsys):
    rc, err, out = _run(files, tiny_dir, {"budget_tokens": 8000, "overfill": 1.6, "reserve": 0.2}, capsys, "ok")
    assert rc in (0, None), err
    m = read_json(out / "m.json")
    sel = read_json(out / "sel" / "selection.json")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    import pyarrow.parquet as pq
    texts = dict(zip(*pq.read_table(files / "pool.parquet", columns=["id", "text"]).to_pydict().values()))
    counts = [len(tok(texts[i], add_special_tokens=False)["input_ids"]) for i in sel["ids"][:sel["n_budget_docs"]]]
    assert m["selected_tokens"] == sum(counts) >= 8000 > sum(counts[:-1])   # the real tokenizer's count
    assert m["fallback_docs"] == 0 and m["register_mix_by"] == "list"
    assert set(m["register_mix"]) == set(REGISTERS)
    assert m["reserve_tail_tokens"] >= 1600 or m["reserve_tail_short"]


@pytest.mark.parametrize("changes, words", [
    ({"mode": "tokens", "weights": {"news": 0.7}}, "curate.weights"),
    ({"mode": "tokens", "weights": {"newz": 1.0}}, "newz"),
    ({"budget_tokens": 10**9}, "curate.budget_tokens: 1000000000 exceeds"),
])
def test_stage_bad_rule_params(files, tiny_dir, capsys, changes, words):
    rc, err, out = _run(files, tiny_dir, changes, capsys, "bad")
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and words in lines[0], err
    assert not out.exists()

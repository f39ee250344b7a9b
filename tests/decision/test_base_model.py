"""The base model's gold-trace NLL and the items stage's build."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.base.config import BaseModelParams
from decision_pipeline.decision.base.model import assess_base, base_source, gold_trace_nll, untrained_like
from decision_pipeline.questions.splits import SPLITS, ItemsParams, build_items

torch.set_num_threads(1)


def test_gold_trace_nll_is_a_mean_per_token(tiny, questions):
    model, tok = tiny
    one = gold_trace_nll(model, tok, questions[:1])
    two = gold_trace_nll(model, tok, questions[:2])
    assert 0 < one < 20 and 0 < two < 20 and math.isfinite(two)
    assert gold_trace_nll(model, tok, questions[:2]) == two   # deterministic


def test_untrained_reference_is_seeded_and_fresh(tiny):
    model, _ = tiny
    a, b = untrained_like(model, 3), untrained_like(model, 3)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(x, y) for x, y in zip(a.parameters(), model.parameters()))


def test_assess_base_reports_both_nlls(tiny_dir, questions):
    p = BaseModelParams(source="path", nll_items=5, path=tiny_dir, threads=1, add_think_tokens=False)
    source = base_source(p, "unused")
    m = assess_base(source, questions, p, seed=1)
    assert m["n_items"] == 5 and m["source"] == tiny_dir
    assert m["gold_trace_nll"] > 0 and m["gold_trace_nll_untrained"] > 0 and m["params"] > 0


def test_missing_base_dir_names_the_key(tmp_path):
    p = BaseModelParams(source="path", nll_items=5, path=str(tmp_path / "nope"), threads=1, add_think_tokens=False)
    with pytest.raises(PipelineError, match="base_model.path"):
        base_source(p, "unused")


def test_build_items_splits_and_counts():
    p = ItemsParams(families=["keyword", "larger"], levels=[0, 1], per_cell=5,
                    splits={"pool": 0.33, "bench": 0.12, "rl": 0.1, "dev": 0.1, "eval": 0.2, "calibration": 0.15}, external="", seed_offset=0)
    rows, metrics = build_items(p, seed=4)
    assert len(rows) == metrics["n_items"] == 20 and [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    assert set(metrics["splits"]) == set(SPLITS) and sum(metrics["splits"].values()) == 20
    assert metrics["families"] == {"keyword": 10, "larger": 10}
    assert build_items(p, seed=4) == (rows, metrics)


def test_items_and_base_params_have_no_code_defaults():
    for cls in (ItemsParams, BaseModelParams):
        for f in dataclasses.fields(cls):
            assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, (cls, f.name)
            assert f.metadata.get("doc"), (cls, f.name)

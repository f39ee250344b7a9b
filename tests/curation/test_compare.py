"""Paired arm comparison over seeds: hand-computed differences, CI bounds and detectable difference."""
from __future__ import annotations

import json
import math

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.curation.compare import Z_SUM_80, compare_arms, paired


def _arm(ppl, eq=None):
    return {"seeds": {"ppl": ppl, **({"ppl_equal_registers": eq} if eq else {})}}


def test_paired_hand_computed():
    r = paired(_arm([10.0, 12.0, 11.0]), _arm([12.0, 13.0, 14.0]), "ppl")
    assert r["per_seed"] == [-2.0, -1.0, -3.0] and r["diff"] == -2.0 and r["n"] == 3
    lo, hi = r["ci95"]
    assert -3.0 <= lo <= hi <= -1.0 and r["detected"]          # every resample mean lies in [-3, -1]
    assert r["mde80"] == round(Z_SUM_80 * 1.0 / math.sqrt(3), 4)  # sd of (-2, -1, -3) is 1
    same = paired(_arm([10.0, 12.0]), _arm([11.0, 11.0]), "ppl")  # diffs -1, +1: no difference
    assert same["diff"] == 0.0 and not same["detected"]


def test_compare_arms_and_stage(tmp_path):
    arms = {"curated": _arm([10.0, 12.0, 11.0], [9.0, 9.0, 9.0]), "random": _arm([12.0, 13.0, 14.0], [9.5, 9.0, 9.1])}
    out = compare_arms(arms)
    assert list(out) == ["vs_random"] and set(out["vs_random"]) == {"ppl", "ppl_equal_registers"}
    assert out["vs_random"]["ppl_equal_registers"]["per_seed"] == [-0.5, 0.0, -0.1]
    with pytest.raises(PipelineError, match="seeds.ppl has 3 vs 2 runs"):
        compare_arms({"curated": arms["curated"], "random": _arm([1.0, 2.0])})
    from stages.pretrain_compare import main
    for name, m in arms.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(m))
    main([f"curated={tmp_path / 'curated.json'}", f"random={tmp_path / 'random.json'}",
          "--metrics", str(tmp_path / "compare.json")])
    assert json.loads((tmp_path / "compare.json").read_text()) == json.loads(json.dumps(out))

"""Paired arm comparison over seeds: hand-computed differences, t-interval, detectable difference, and
"detected" only from >= 5 paired seeds (common/verdict.py)."""
from __future__ import annotations

import json
import math

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.verdict import seed_verdict
from decision_pipeline.curation.compare import compare_arms, paired


def _arm(ppl, eq=None):
    return {"seeds": {"ppl": ppl, **({"ppl_equal_registers": eq} if eq else {})}}


def test_paired_hand_computed():
    r = paired(_arm([10.0, 12.0, 11.0]), _arm([12.0, 13.0, 14.0]), "ppl")
    assert r["per_seed"] == [-2.0, -1.0, -3.0] and r["diff"] == -2.0 and r["n"] == 3 and r["sd"] == 1.0
    # t(0.975, 2) = 4.3027: -2 +- 4.3027 / sqrt(3); mde80 = (4.3027 + t(0.8, 2) = 1.0607) / sqrt(3)
    assert r["ci95"] == [round(-2 - 4.302653 / math.sqrt(3), 4), round(-2 + 4.302653 / math.sqrt(3), 4)]
    assert r["mde80"] == round((4.302653 + 1.060660) / math.sqrt(3), 4)
    assert r["verdict"] == "not tested" and not r["detected"]   # 3 seeds: no verdict, however clear the sign
    same = paired(_arm([10.0, 12.0]), _arm([11.0, 11.0]), "ppl")  # diffs -1, +1: no difference
    assert same["diff"] == 0.0 and not same["detected"]


def test_verdict_needs_five_runs_an_interval_off_zero_and_a_difference_above_the_noise():
    five = [-2.0, -1.0, -3.0, -2.0, -2.0]                          # mean -2, sd 0.7071
    v = seed_verdict(five)
    half = 2.776445 * math.sqrt(0.5) / math.sqrt(5)                # t(0.975, 4) sd / sqrt(n)
    assert v["verdict"] == "detected" and v["detected"] and v["ci_low"] == round(-2 - half, 4)
    assert seed_verdict(five, noise=2.5)["verdict"] == "not detected"   # |-2| does not exceed the noise 2.5
    assert seed_verdict([-1.0, 1.0, -1.0, 1.0, 0.5])["reason"] == "the 95% interval includes 0"
    assert seed_verdict(five[:4])["verdict"] == "not tested"


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

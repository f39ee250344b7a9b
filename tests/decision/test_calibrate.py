import numpy as np

from decision_pipeline.decision.evaluate.calibration import fit_and_report, resplit_study, significant_temperatures


def _questions(temperature: float, n: int = 300, seed: int = 0, task: str = "choice"):
    rng = np.random.default_rng(seed)
    logits = [rng.normal(0, 3, 3) for _ in range(n)]
    gold = [int(rng.choice(3, p=np.exp(lg / temperature) / np.exp(lg / temperature).sum())) for lg in logits]
    qs = [{"id": f"{task}{i}", "task": task, "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
           "gold": "abc"[g]} for i, g in enumerate(gold)]
    return logits, qs


def test_a_real_temperature_is_kept_and_lowers_nll():
    logits, qs = _questions(temperature=3.0)  # logits 3x over-confident
    out = fit_and_report(logits, qs, n_bins=10)
    assert out["temperatures"]["choice"] == out["fitted"]["choice"] > 2.0
    assert out["p_value"]["choice"] < 0.05
    assert out["after"]["nll"] < out["before"]["nll"] and out["after"]["ece"] < out["before"]["ece"]


def test_a_noise_temperature_stays_at_one_per_task():
    over_logits, over_qs = _questions(temperature=3.0, task="choice")
    cal_logits, cal_qs = _questions(temperature=1.0, seed=1, task="score")  # already calibrated
    kept, fitted, p, bounds = significant_temperatures(over_logits + cal_logits, over_qs + cal_qs, alpha=0.05)
    assert kept["choice"] > 2.0 and kept["score"] == 1.0
    assert fitted["score"] != 1.0 and p["score"] >= 0.05  # a fit exists, the test rejects it
    assert bounds == {}
    strict = fit_and_report(over_logits, over_qs, n_bins=10, alpha=0.0)
    assert strict["temperatures"]["choice"] == 1.0 and strict["after"] == strict["before"]


def test_resplit_study_shows_always_fit_hurts_a_calibrated_readout():
    logits, qs = _questions(temperature=1.0, n=400, seed=2)
    out = resplit_study(logits, qs, n_bins=10, alpha=0.05, n_splits=30, seed=0)
    assert out["n_splits"] == 30
    # fitting on noise moves ECE/NLL up more than the tested rule, which mostly keeps T = 1
    assert out["always_fit"]["nll_change_mean"] > 0
    assert out["tested"]["ece_worse_share"] <= out["always_fit"]["ece_worse_share"]
    tested = out["tested"]
    assert tested["ece_better_share"] + tested["ece_unchanged_share"] + tested["ece_worse_share"] == 1.0
    assert tested["ece_unchanged_share"] > 0.5  # mostly T = 1 kept: nothing changes
    spread = out["tested_minus_always_fit"]["ece"]
    assert spread["p2_5"] <= spread["mean"] <= spread["p97_5"]
    assert abs(out["tested"]["nll_change_mean"]) <= out["always_fit"]["nll_change_mean"]
    assert resplit_study(logits, qs, 10, 0.05, n_splits=0, seed=0) is None


def test_resplit_study_shows_a_real_temperature_helps():
    logits, qs = _questions(temperature=3.0, n=400, seed=3)
    out = resplit_study(logits, qs, n_bins=10, alpha=0.05, n_splits=10, seed=0)
    assert out["tested"]["nll_change_mean"] < -0.05 and out["tested"]["ece_worse_share"] == 0.0


def test_empty_input_reports_nothing():
    assert fit_and_report([], [], n_bins=10)["after"] is None


def test_temperature_at_a_bound_is_flagged_and_never_sharpened_to_the_limit():
    rng = np.random.default_rng(4)
    # every item right with a clear margin: NLL keeps falling as T -> 0, the fit hits the lower bound
    right = [np.array([2.0, 0.0, 0.0]) + rng.normal(0, 0.1, 3) for _ in range(60)]
    qs = [{"id": f"r{i}", "task": "noul", "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "gold": "a"}
          for i in range(60)]
    # logits with no information about the gold: the fit hits the upper bound (uniform)
    noise = [rng.normal(0, 3, 3) for _ in range(300)]
    noise_qs = [{"id": f"n{i}", "task": "choice", "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
                 "gold": "abc"[int(rng.integers(3))]} for i in range(300)]
    kept, fitted, p, bounds = significant_temperatures(right + noise, qs + noise_qs, alpha=0.05)
    assert bounds == {"noul": "lower", "choice": "upper"}
    assert fitted["noul"] < 0.06 and kept["noul"] == 1.0
    assert kept["choice"] == fitted["choice"] > 19 and p["choice"] < 0.05


# ---------------------------------------------------------------- the yes/no offset and H1-H4 (#35.7)
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.evaluate.config import CalibrateParams
from decision_pipeline.decision.evaluate.calibration import (apply_yes_offset, calibrate_answers,
                                                             calibration_hypotheses, fit_offsets, fit_yes_offset,
                                                             fold_of, paired_test, read_yes_offset)

YES_NO = [{"id": "true"}, {"id": "false"}]


def _yes_no(golds: str, logits=(0.0, 0.0), options=YES_NO):
    qs = [{"id": f"y{i}", "task": "noul", "options": options, "gold": "true" if g == "y" else "false"}
          for i, g in enumerate(golds)]
    return [np.array(logits, dtype=float) for _ in qs], qs


def test_offset_hand_computed_three_yes_of_four():
    # equal yes/no logits: P(yes) = sigmoid(b), and the NLL optimum makes it the yes share 3/4, so b = ln 3;
    # deviance = 2 (NLL(0) - NLL(b)) = 2 (4 ln 2 - 3 ln(4/3) - ln 4) = 1.04650, chi-square(1) p = 0.3063
    logits, qs = _yes_no("yyyn")
    fit = fit_yes_offset(logits, qs, {}, "fitted", 0.05, 200, seed=0)
    dev = 2 * (4 * math.log(2) - 3 * math.log(4 / 3) - math.log(4))
    assert fit["offset"] == round(math.log(3), 6) == fit["kept"] and fit["n"] == 4
    assert fit["deviance"] == pytest.approx(dev, abs=2e-6) and fit["deviance"] == pytest.approx(1.046496, abs=2e-6)
    assert fit["p_value"] == pytest.approx(math.erfc(math.sqrt(dev / 2)), abs=2e-6) == pytest.approx(0.3063, abs=1e-4)
    assert fit["yes_share"] == 0.75 and fit["yes_bias"] == -0.25 and fit["yes_bias_after"] == 0.0
    assert fit["ci_low"] <= fit["offset"] <= fit["ci_high"]
    # the tested mode keeps it only where p < alpha: here p = 0.31, so not; off never
    assert fit_yes_offset(logits, qs, {}, "tested", 0.05, 50, seed=0)["kept"] == 0.0
    assert fit_yes_offset(logits, qs, {}, "tested", 0.5, 50, seed=0)["kept"] == round(math.log(3), 6)
    assert fit_yes_offset(logits, qs, {}, "off", 0.05, 50, seed=0)["kept"] == 0.0
    with pytest.raises(PipelineError, match="calibrate.yes_offset: 'on'"):
        fit_yes_offset(logits, qs, {}, "on", 0.05, 50, seed=0)


def test_offset_is_read_after_the_temperature_and_by_option_id():
    # yes logit 2 above no at T = 2: margin 1, so the fitted b is ln 3 - 1 (sigmoid(1 + b) = 3/4)
    logits, qs = _yes_no("yyyn", logits=(0.0, 2.0), options=[{"id": "false"}, {"id": "true"}])
    fit = fit_yes_offset(logits, qs, {"noul": 2.0}, "fitted", 0.05, 50, seed=0)
    assert fit["offset"] == pytest.approx(math.log(3) - 1, abs=1e-6)
    assert float(fit_offsets(np.array([1.0, 1, 1, 1]), np.array([1.0, 1, 1, 0]))[0]) == pytest.approx(math.log(3) - 1)


def test_a_fit_at_the_bound_is_never_applied():
    logits, qs = _yes_no("yyyy")  # every answer yes: the NLL falls as b grows without end
    fit = fit_yes_offset(logits, qs, {}, "fitted", 0.05, 50, seed=0)
    assert fit["at_bound"] and fit["offset"] > 19.9 and fit["kept"] == 0.0


def test_apply_yes_offset_equals_adding_it_after_the_temperature():
    from decision_pipeline.common.stats import softmax_with_temperature
    qs = [{"id": "a", "task": "noul", "options": [{"id": "false"}, {"id": "true"}], "gold": "true"},
          {"id": "b", "task": "choice", "options": [{"id": "x"}, {"id": "y"}], "gold": "x"}]
    logits = [np.array([0.3, -0.2]), np.array([1.0, 0.0])]
    out = apply_yes_offset(logits + [None], qs + [qs[0]], {"noul": 2.0}, 0.7)
    z = np.array([0.3, -0.2]) / 2.0
    z[1] += 0.7  # the yes option is second here
    assert np.allclose(softmax_with_temperature(out[0], 2.0), np.exp(z) / np.exp(z).sum())
    assert np.array_equal(out[1], logits[1]) and out[2] is None  # other tasks and a missing readout pass through


def test_paired_test_verdicts_by_hand():
    minus = np.full(10, -1.0)
    r = paired_test(lambda s: float(minus[s].mean()), 10, 100, 0.05, 0, "x")
    assert (r["value"], r["ci_low"], r["ci_high"], r["p_value"], r["n"], r["verdict"]) == (-1.0, -1.0, -1.0, 0.0, 10, "supported")
    zero = np.zeros(10)
    assert paired_test(lambda s: float(zero[s].mean()), 10, 100, 0.05, 0, "x")["verdict"] == "not detected"
    assert paired_test(lambda s: float(zero[s].mean()), 10, 100, 0.05, 0, "x")["p_value"] == 1.0
    assert paired_test(lambda s: float(-minus[s].mean()), 10, 100, 0.05, 0, "x")["verdict"] == "contradicted"
    assert paired_test(lambda s: 0.0, 0, 100, 0.05, 0, "x")["verdict"] == "not tested"
    # half the items at -1, half at +1: the mean is 0 and the CI straddles it
    mixed = np.array([-1.0, 1.0] * 20)
    r = paired_test(lambda s: float(mixed[s].mean()), 40, 500, 0.05, 0, "x")
    assert r["value"] == 0.0 and r["ci_low"] < 0 < r["ci_high"] and r["p_value"] > 0.5


def test_folds_are_a_balanced_seeded_partition():
    f = fold_of(23, 5, seed=1)
    assert sorted(np.bincount(f).tolist()) == [4, 4, 5, 5, 5] and np.array_equal(f, fold_of(23, 5, seed=1))
    assert not np.array_equal(f, fold_of(23, 5, seed=2))


PARAMS = CalibrateParams(items=600, alpha=0.05, resplits=0, ece_bins=10, yes_offset="fitted", folds=5, bootstrap=400)


def _mixed(n=600, seed=0, choice_scale=3.0, yes_shift=1.5):
    """choice logits `choice_scale` x too sharp, score logits as much too flat, yes/no logits shifted toward
    yes by `yes_shift`; every fifth item has no post-chain readout, the others a calibrated one."""
    rng = np.random.default_rng(seed)
    logits, post, qs = [], [], []
    for i in range(n):
        task = ("choice", "score", "noul")[i % 3]
        opts = YES_NO if task == "noul" else [{"id": c} for c in "abc"]
        true = rng.normal(0, 1.5, len(opts))
        g = int(rng.choice(len(opts), p=np.exp(true) / np.exp(true).sum()))
        lg = true * {"choice": choice_scale, "score": 1 / choice_scale, "noul": 1.0}[task]
        if task == "noul":
            lg = lg + np.array([yes_shift, 0.0])
        logits.append(lg)
        post.append(true if i % 5 else None)
        qs.append({"id": f"q{i}", "task": task, "options": opts, "gold": opts[g]["id"]})
    return logits, post, qs


def test_hypotheses_supported_where_the_data_plant_them():
    logits, post, qs = _mixed()
    h = calibration_hypotheses(logits, post, qs, PARAMS, seed=1)
    assert (h["folds"], h["bootstrap"], h["confidence"]) == (5, 400, 0.95)
    assert h["H1"]["verdict"] == "supported" and h["H1"]["n"] == 600   # wrong temperatures, fixed
    assert h["H2"]["verdict"] == "supported"                            # two tasks wrong in opposite directions
    assert h["H4"]["verdict"] == "supported" and h["H4"]["n"] == 200    # the planted yes-bias, removed
    assert h["H4"]["yes_bias_before"] > 0.1 and abs(h["H4"]["yes_bias_after"]) < 0.03
    for name in ("H1", "H2", "H3", "H4"):
        r = h[name]
        assert r["ci_low"] <= r["value"] <= r["ci_high"] and 0 <= r["p_value"] <= 1 and r["claim"] and r["statistic"]
        assert (r["p_value"] < 0.05) == (r["ci_high"] < 0 or r["ci_low"] > 0)
    assert h == calibration_hypotheses(logits, post, qs, PARAMS, seed=1)  # deterministic


def test_hypotheses_not_supported_on_calibrated_unbiased_data():
    logits, post, qs = _mixed(choice_scale=1.0, yes_shift=0.0)
    h = calibration_hypotheses(logits, post, qs, PARAMS, seed=1)
    assert all(h[k]["verdict"] == "not detected" for k in ("H1", "H2", "H3", "H4"))
    assert h["H1"]["value"] == 0.0 and h["H1"]["p_value"] == 1.0  # the test keeps T = 1 in every fold


def test_h3_prefers_the_readout_a_temperature_can_fix():
    # readout: every other item 4x too sharp, the rest 4x too flat (one temperature cannot fix both); post-chain calibrated
    rng = np.random.default_rng(5)
    logits, post, qs = [], [], []
    for i in range(600):
        true = rng.normal(0, 1.5, 3)
        g = int(rng.choice(3, p=np.exp(true) / np.exp(true).sum()))
        logits.append(true * (4.0 if i % 2 else 0.25))
        post.append(true)
        qs.append({"id": f"q{i}", "task": "choice", "options": [{"id": c} for c in "abc"], "gold": "abc"[g]})
    h = calibration_hypotheses(logits, post, qs, PARAMS, seed=1)
    assert h["H3"]["verdict"] == "supported" and h["H3"]["n"] == 600
    assert h["H4"]["verdict"] == "not tested" and h["H4"]["n"] == 0
    assert h["H2"]["value"] == 0.0 and h["H2"]["verdict"] == "not detected"  # one task: per-task is the global
    swapped = calibration_hypotheses(post, logits, qs, PARAMS, seed=1)
    assert swapped["H3"]["verdict"] == "contradicted"


def test_calibrate_answers_writes_offsets_and_hypotheses():
    logits, post, qs = _mixed(n=300)
    temps, offsets, report = calibrate_answers(logits, [{"post_logits": p} for p in post], qs, PARAMS, seed=3)
    assert set(offsets) == {"readout", "post_chain"} and offsets["readout"] == report["readout"]["yes_offset"]["kept"] < 0
    assert report["readout"]["yes_offset"]["p_value"] < 0.05 and report["readout"]["yes_offset"]["n"] == 100
    assert report["readout"]["after_offset"]["nll"] <= report["readout"]["after"]["nll"]  # in-sample: the NLL optimum
    assert set(report["hypotheses"]) >= {"H1", "H2", "H3", "H4"}
    with pytest.raises(PipelineError, match="calibrate.folds: 5 folds need at least"):
        calibration_hypotheses(logits[:4], post[:4], qs[:4], PARAMS, seed=1)


def test_read_yes_offset_checks_the_file(tmp_path):
    good = tmp_path / "yes_offset.json"
    good.write_text(json.dumps({"readout": -0.5, "post_chain": 0.0}))
    assert read_yes_offset(str(good)) == {"readout": -0.5, "post_chain": 0.0}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"readout": "x", "post_chain": 0.0}))
    with pytest.raises(PipelineError, match="bad.json: expected"):
        read_yes_offset(str(bad))
    with pytest.raises(PipelineError, match="missing.json: unreadable"):
        read_yes_offset(str(tmp_path / "missing.json"))


def test_stage_refuses_more_folds_than_items_before_loading_a_model(tmp_path):
    """One line, exit 2, nothing written: the check runs before the model directory is even read."""
    import yaml
    from decision_pipeline.common.io import write_table
    from decision_pipeline.common.params import from_dict
    from decision_pipeline.common.profiles import merged_profile
    from decision_pipeline.questions.splits import ItemsParams, build_items
    from decision_pipeline.questions.schema import QUESTION_SCHEMA
    root = Path(__file__).resolve().parents[2]
    data = merged_profile("micro", root)
    rows, _ = build_items(from_dict(ItemsParams, data["items"], "items"), data["base"]["seed"])
    write_table(tmp_path / "items.parquet", rows, QUESTION_SCHEMA)
    data["calibrate"]["folds"] = 10_000
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, "-m", "stages.calibrate", "--params", str(tmp_path / "params.yaml"),
                           "--model", str(tmp_path / "no_model"), "--items", str(tmp_path / "items.parquet"),
                           "--out", str(tmp_path / "out"), "--metrics", str(tmp_path / "m.json")],
                          cwd=root, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "calibrate.folds is 10000" in lines[0], proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "m.json").exists()


def test_stage_writes_the_offset_beside_the_temperatures_and_h1_h4_in_metrics(tmp_path, tiny_dir):
    """The micro profile's calibrate on the tiny model: yes_offset.json and the hypotheses, deterministic."""
    import yaml
    from decision_pipeline.common.io import read_json, write_table
    from decision_pipeline.common.params import from_dict
    from decision_pipeline.common.profiles import merged_profile
    from decision_pipeline.questions.splits import ItemsParams, build_items
    from decision_pipeline.questions.schema import QUESTION_SCHEMA
    from stages.calibrate import main
    root = Path(__file__).resolve().parents[2]
    data = merged_profile("micro", root)
    rows, _ = build_items(from_dict(ItemsParams, data["items"], "items"), data["base"]["seed"])
    write_table(tmp_path / "items.parquet", rows, QUESTION_SCHEMA)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(data))
    runs = []
    for tag in ("a", "b"):
        rc = main(["--params", str(tmp_path / "params.yaml"), "--model", tiny_dir, "--items",
                   str(tmp_path / "items.parquet"), "--out", str(tmp_path / tag), "--metrics", str(tmp_path / f"{tag}.json")])
        assert rc in (0, None)
        runs.append((read_json(tmp_path / f"{tag}.json"), read_yes_offset(str(tmp_path / tag / "yes_offset.json"))))
    (m, offsets), again = runs[0], runs[1]
    assert again == runs[0]
    assert offsets["readout"] == m["readout"]["yes_offset"]["kept"]
    assert {m["hypotheses"][k]["verdict"] for k in ("H1", "H2", "H3", "H4")} <= {"supported", "contradicted",
                                                                                "not detected", "not tested"}
    assert m["hypotheses"]["H1"]["n"] == m["n_items"] == data["calibrate"]["items"]
    assert set(read_json(tmp_path / "a" / "temperatures.json")) == {"readout", "post_chain"}  # readers unchanged

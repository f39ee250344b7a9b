"""`make review`: every metric change read against its run-to-run noise (metrics/noise/<source>.json).

Hand-computed bands: t(0.975, n-1) x sqrt(2) x sd; with n = 6, t = 2.570582.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from decision_pipeline.reporting.review.diff import (CHANCE, IN, NONE, OUT, SET, SETUP, bands, bh_reject, choose_source,
                                                coverage, diff_metrics, metric_rows, p_value, review_markdown)

ROOT = Path(__file__).resolve().parents[3]
EV = "metrics/evaluate/sft.json"
T5 = 2.570582


def _noise(source: str, spread: dict, n: int = 6) -> dict:
    return {f"metrics/noise/{source}.json": {"source": source, "n": n, "spread": {
        EV: {k: {"n": n, "sd": sd, "halfrange": sd, "mean": 0.0} for k, sd in spread.items()}}}}


def test_bands_and_verdicts_hand_computed():
    nf = _noise("reseed", {"readout.accuracy": 0.02, "n_items": 0.0, "readout.nll": 0.1, "readout.loss": 0.01})
    b = bands(nf, "reseed")
    assert math.isclose(b[(EV, "readout.accuracy")]["band"], T5 * math.sqrt(2) * 0.02, rel_tol=1e-6)  # 0.07271
    diff = diff_metrics({EV: {"readout": {"accuracy": 0.50, "nll": 1.0, "loss": 1.0, "ci_low": 0.4}, "n_items": 500,
                              "x": 1}},
                        {EV: {"readout": {"accuracy": 0.58, "nll": 1.2, "loss": 1.1, "ci_low": 0.45}, "n_items": 510,
                              "y": 2}})
    rows = {r["key"]: r for r in metric_rows(diff, b)}
    # p (t, 5 df, of change / (sqrt(2) sd)): loss 0.000875, accuracy 0.036743, nll 0.216437. Benjamini-Hochberg
    # over the 3 judged keys: thresholds 1/3, 2/3, 3/3 x 0.05 = 0.0167, 0.0333, 0.05 -> only loss is kept
    assert math.isclose(rows["readout.accuracy"]["p"], 0.036743, rel_tol=1e-4)
    assert {k: r["verdict"] for k, r in rows.items()} == {
        "readout.loss": OUT,              # +0.1 > 0.0364 and kept by the false-discovery control
        "readout.accuracy": CHANCE,       # +0.08 > 0.0727, but 0.0367 > 0.0333: as many outside as chance gives
        "readout.nll": IN,                # +0.2 < 0.3636
        "n_items": SETUP,                 # sd 0 over reruns: a change of setup
        "x": "added/removed", "y": "added/removed"}   # readout.ci_low is a bound, not a row


def test_p_value_is_the_band_and_bh_steps_up_by_hand():
    noise = {"sd": 0.02, "n": 6}
    assert math.isclose(p_value(T5 * math.sqrt(2) * 0.02, noise), 0.05, rel_tol=1e-5)   # on the band: p = 0.05
    assert bh_reject([0.001, 0.02, 0.03, 0.5]) == [True, True, True, False]   # 0.03 <= 3/4 x 0.05
    assert bh_reject([0.04, 0.01, 0.045]) == [True, True, True]   # 0.04 > 2/3 x 0.05, but 0.045 <= 3/3 x 0.05
    assert bh_reject([0.03, 0.04]) == [True, True] and bh_reject([0.03, 0.06]) == [False, False] and bh_reject([]) == []


def test_many_keys_at_noise_level_are_chance_and_the_review_says_how_many_chance_gives():
    """Issue 54: after the RL experiment 18 of 266 keys were flagged, about what chance gives, and nothing said so.
    266 keys of sd 1 (n = 6): 18 just outside their band (|z| 2.6, p 0.048), the rest inside; one real move."""
    spread = {f"k{i:03d}": 1.0 for i in range(266)}
    old = {k: 0.0 for k in spread}
    new = {k: (3.7 if i < 18 else 1.0) for i, k in enumerate(spread)}     # 3.7 > 3.6354 = the band
    new["k265"] = 40.0                                                     # p ~ 2e-6: a finding
    md = review_markdown("main", {}, diff_metrics({EV: old}, {EV: new}), bands(_noise("rl_seed", spread), "rl_seed"),
                         "rl_seed")
    assert ("266 changed metric(s) judged against their noise: 19 outside their 95% band, where chance alone gives "
            "about 13.3 (5% of 266) if the change did nothing") in md
    assert "After controlling the false-discovery rate across the 266 (Benjamini-Hochberg, q = 0.05), 1 remain" in md
    assert f'18 read "{CHANCE}"' in md
    assert md.count("| **outside noise** |") == 1 and md.count(f"| {CHANCE} |") == 18


def test_keys_the_route_fraction_sets_are_not_findings_on_the_committed_metrics():
    """Issue 54: after `dvc exp run -S s1mb.route_fraction=0.2` all 7 'outside noise' marks were routing counts
    the param sets (routed_questions 98 -> 66). Committed S1MB metrics and reseed noise, the counts scaled as
    the routing does (a third fewer questions routed), one real metric moved."""
    committed = {f"metrics/s1mb/{m}.json": json.loads((ROOT / f"metrics/s1mb/{m}.json").read_text())
                 for m in ("base", "sft", "rl")}
    noise = {"metrics/noise/reseed.json": json.loads((ROOT / "metrics/noise/reseed.json").read_text())}
    changed = json.loads(json.dumps(committed))
    for doc in changed.values():
        doc["route_fraction"] = 0.2
        for key in ("routed_questions", "routed_parsed", "routed_post_chain"):
            doc[key] = round(doc[key] * 2 / 3)
    changed["metrics/s1mb/sft.json"]["task_avg_routed"] += 0.4   # reseed sd 0.0751: p 0.013, the one judged key
    routed = committed["metrics/s1mb/sft.json"]["routed_questions"]   # 98 when issue 54 was filed
    assert routed > 30 and changed["metrics/s1mb/sft.json"]["routed_questions"] == round(routed * 2 / 3) < routed
    params = {"params.yaml": {"s1mb.route_fraction": {"old": 0.3, "new": 0.2}}}
    rows = metric_rows(diff_metrics(committed, changed), bands(noise, "reseed"), params)
    routing = [r for r in rows if r["key"].startswith(("routed_", "route_fraction"))]
    # route_fraction (echo) x3, routed_questions x3, routed_parsed and routed_post_chain x2 (base: 0 -> 0)
    assert len(routing) == 3 + 3 + 2 + 2 and all(r["verdict"] == SET and r["set_by"] == "s1mb.route_fraction"
                                             for r in routing), [(r["file"], r["key"], r["verdict"]) for r in routing]
    assert [(r["file"], r["key"]) for r in rows if r["verdict"] == OUT] == [("metrics/s1mb/sft.json", "task_avg_routed")]
    md = review_markdown("main", params, diff_metrics(committed, changed), bands(noise, "reseed"), "reseed")
    assert "#### Set by the change: what `s1mb.route_fraction` fixes by construction (not findings)" in md
    assert "1 **outside noise** (findings)" in md and f"10 {SET}" in md


def test_source_follows_what_the_change_varies():
    have = {"reseed", "sft_seed", "rl_seed", "pretrain_init", "pretrain_order"}
    assert choose_source({"params.yaml": {"rl.lr": {}}}, have) == "rl_seed"
    assert choose_source({"params.yaml": {"sft.lr": {}, "lr_sweep.lrs": {}}}, have) == "sft_seed"
    assert choose_source({"params.yaml": {"pretrain.lr": {}}}, have) == "pretrain"
    assert choose_source({"params.yaml": {"sft.lr": {}, "rl.lr": {}}}, have) == "reseed"
    assert choose_source({"params.yaml": {"rl.lr": {}}}, {"reseed"}) == "reseed"   # not measured: the whole chain
    assert choose_source({}, have) == "reseed"
    both = {**_noise("pretrain_init", {"a": 0.1}), **_noise("pretrain_order", {"a": 0.3})}
    assert bands(both, "pretrain")[(EV, "a")]["source"] == "pretrain_order"          # the larger band


def test_markdown_puts_headlines_first_and_says_the_source():
    nf = _noise("reseed", {"cis.readout_accuracy.point": 0.02, "other": 0.5})
    diff = diff_metrics({EV: {"cis": {"readout_accuracy": {"point": 0.5}}, "other": 1.0}},
                        {EV: {"cis": {"readout_accuracy": {"point": 0.6}}, "other": 1.1}})
    md = review_markdown("main", {}, diff, bands(nf, "reseed"), "reseed")
    head = md.index("#### Headline numbers")
    assert head < md.index("#### Every metric")
    assert "| SFT readout accuracy | 0.5 | 0.6 | 0.1 |" in md[head:md.index("#### Every metric")]
    assert "Noise source: **reseed**" in md and "(sd 0.02, n=6, reseed)" in md
    assert "No run-to-run noise is recorded" in review_markdown("main", {}, diff, {}, "reseed")


def test_compare_marks_headline_changes_of_experiments():
    from decision_pipeline.reporting.review.compare import table
    nf = _noise("reseed", {"cis.readout_accuracy.point": 0.01})
    p = {"sft.lr": 0.001}
    runs = [("main", {"sft_readout_accuracy": 0.5012345678901, "other": 1.0}, p),
            ("exp-a", {"sft_readout_accuracy": 0.58, "other": 1.0}, p),
            ("exp-b", {"sft_readout_accuracy": 0.51, "other": 1.0}, p)]
    md = table(runs, bands(nf, "reseed"))
    rows = md.split("\n\n")[0].splitlines()
    # one number format (4 significant digits): no raw float beside rounded ones; every change marked
    assert rows[2] == "| SFT readout accuracy | 0.5012 | 0.58 (+0.07877, outside noise) | 0.51 (+0.008765, inside noise) |"
    assert "other" not in md and len(rows) == 3               # header, rule, one changed row
    assert all(row.count("|") == 5 for row in rows)
    legend = md.split("\n\n")[1]
    assert all(mark in legend for mark in ("inside noise:", "outside noise:", "set by the change:"))


def test_compare_marks_a_headline_the_param_sets_and_has_a_correct_table_with_no_experiment():
    from decision_pipeline.reporting.review.compare import table
    nf = _noise("reseed", {"cis.readout_accuracy.point": 0.01})
    base = ("main", {"sft_readout_accuracy": 0.5}, {"evaluate.fixed_accuracy": 0.5})
    echo = ("exp-echo", {"sft_readout_accuracy": 0.6}, {"evaluate.fixed_accuracy": 0.6})  # echoes the param
    md = table([base, echo], bands(nf, "reseed"))
    assert "| SFT readout accuracy | 0.5 | 0.6 (+0.1, set by the change) |" in md
    alone = table([("main", {"sft_readout_accuracy": 0.1832488730159635, "x": 2}, {})], {}).splitlines()
    assert alone[:4] == ["| quantity | main |", "|---|---|", "| SFT readout accuracy | 0.1832 |", "| x | 2 |"]
    assert "No experiment of main yet" in alone[-1]


def test_compare_reads_experiments_and_their_params_from_dvc_exp_show_json():
    from decision_pipeline.reporting.review.compare import HEADLINE, _runs

    def data(route: float, task_avg: float) -> dict:
        return {"params": {"params.yaml": {"data": {"s1mb": {"route_fraction": route, "cohort_dir": ""}}}},
                "metrics": {HEADLINE: {"data": {"sft_s1mb_task_avg_routed": task_avg}}}}

    show = [{"rev": "workspace", "data": data(0.2, 0.2)},
            {"rev": "abcdef1234", "name": "main", "data": data(0.3, 0.18),
             "experiments": [{"name": "lower-route", "revs": [{"rev": "fedcba", "data": data(0.2, 0.21)}]}]}]
    assert _runs(show) == [
        ("main", {"sft_s1mb_task_avg_routed": 0.18}, {"s1mb.route_fraction": 0.3, "s1mb.cohort_dir": ""}),
        ("lower-route", {"sft_s1mb_task_avg_routed": 0.21}, {"s1mb.route_fraction": 0.2, "s1mb.cohort_dir": ""})]


def test_coverage_lists_metrics_without_noise():
    cov = coverage({EV: {"a": 1, "b": 2, "ci_low": 0}}, bands(_noise("reseed", {"a": 0.1}), "reseed"))
    assert cov == {"metrics": 2, "with_noise": 1, "none": [f"{EV}:b"]}


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


def test_cli_on_a_branch_that_changes_one_param(tmp_path):
    """`make review` on a branch: the param is listed, the metric that moved beyond its rl_seed band is
    flagged, and a metric outside dvc.yaml's declared metrics is compared too."""
    repo = tmp_path / "repo"
    (repo / "metrics/evaluate").mkdir(parents=True)
    (repo / "metrics/noise").mkdir(parents=True)
    (repo / "params.yaml").write_text("rl:\n  lr: 0.002\n")
    (repo / "dvc.yaml").write_text("stages:\n  rl:\n    cmd: 'true'\n    params: [rl]\n")
    metrics = {"readout": {"accuracy": 0.58}, "thinking": {"accuracy": 0.34}}
    (repo / EV).write_text(json.dumps(metrics))
    for name, doc in {**_noise("reseed", {"readout.accuracy": 0.05, "thinking.accuracy": 0.05}),
                      **_noise("rl_seed", {"readout.accuracy": 0.01, "thinking.accuracy": 0.01})}.items():
        (repo / name).write_text(json.dumps(doc))
    _git(repo, "init", "-q", "-b", "main")
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=repo, check=True, capture_output=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "checkout", "-qb", "lr")
    (repo / "params.yaml").write_text("rl:\n  lr: 0.004\n")
    metrics["readout"]["accuracy"] = 0.66            # +0.08 > 2.5706 x 1.4142 x 0.01 = 0.0364
    metrics["thinking"]["accuracy"] = 0.36           # +0.02 inside
    (repo / EV).write_text(json.dumps(metrics))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "decision_pipeline", "review", "--base", "main", "--out", "review", "--no-plots"]
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    md = (repo / "review/review.md").read_text()
    assert "| params.yaml | rl.lr | 0.002 | 0.004 |" in md and "Noise source: **rl_seed**" in md
    assert f"| {EV} | readout.accuracy | 0.58 | 0.66 |" in md and "**outside noise** |" in md
    assert "| thinking.accuracy | 0.34 | 0.36 |" in md.replace(f"| {EV} ", "")
    assert md.count("inside noise |") == 1
    bad = subprocess.run(cmd[:5] + ["nope"], cwd=repo, capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "--base nope" in bad.stderr
    src = subprocess.run(cmd + ["--source", "data"], cwd=repo, capture_output=True, text=True, env=env)
    assert src.returncode == 2 and "--source data: no metrics/noise/data.json recorded" in src.stderr

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

from decision_pipeline.reporting.review.diff import (IN, NONE, OUT, SETUP, bands, choose_source, coverage, diff_metrics,
                                                metric_rows, review_markdown)

ROOT = Path(__file__).resolve().parents[3]
EV = "metrics/evaluate/sft.json"
T5 = 2.570582


def _noise(source: str, spread: dict, n: int = 6) -> dict:
    return {f"metrics/noise/{source}.json": {"source": source, "n": n, "spread": {
        EV: {k: {"n": n, "sd": sd, "halfrange": sd, "mean": 0.0} for k, sd in spread.items()}}}}


def test_bands_and_verdicts_hand_computed():
    nf = _noise("reseed", {"readout.accuracy": 0.02, "n_items": 0.0, "readout.nll": 0.1})
    b = bands(nf, "reseed")
    assert math.isclose(b[(EV, "readout.accuracy")]["band"], T5 * math.sqrt(2) * 0.02, rel_tol=1e-6)  # 0.07271
    diff = diff_metrics({EV: {"readout": {"accuracy": 0.50, "nll": 1.0, "ci_low": 0.4}, "n_items": 500, "x": 1}},
                        {EV: {"readout": {"accuracy": 0.58, "nll": 1.2, "ci_low": 0.45}, "n_items": 510, "y": 2}})
    rows = {r["key"]: r["verdict"] for r in metric_rows(diff, b)}
    assert rows == {"readout.accuracy": OUT,          # +0.08 > 0.0727
                    "readout.nll": IN,                # +0.2 < 0.3636
                    "n_items": SETUP,                 # sd 0 over reruns: a change of setup
                    "x": "added/removed", "y": "added/removed"}   # readout.ci_low is a bound, not a row


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
    runs = [("main", {"sft_readout_accuracy": 0.50, "other": 1.0}),
            ("exp-a", {"sft_readout_accuracy": 0.58, "other": 1.0}), ("exp-b", {"sft_readout_accuracy": 0.51, "other": 1.0})]
    md = table(runs, bands(nf, "reseed"))
    assert "| SFT readout accuracy | 0.5 | 0.58 (+0.08, outside noise) | 0.51 (+0.01) |" in md
    assert "other" not in md and md.count("\n") == 2          # header, rule, one changed row


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

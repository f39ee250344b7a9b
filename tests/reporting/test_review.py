"""Review markdown on constructed diffs; noise rules; the CLI on a real git + DVC repository."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.reporting.registry import Headline
from decision_pipeline.reporting.review import metric_rows, noise_index, review_markdown, verdict

EV = "metrics/evaluate/sft.json"
METRICS = {
    EV: {"readout": {"accuracy": 0.58},
         "cis": {"readout_accuracy": {"point": 0.58, "ci_low": 0.54, "ci_high": 0.62}},
         "vs_base": {"readout_accuracy": {"diff": 0.18, "ci_low": 0.13, "ci_high": 0.23}},
         "resplit": {"ece_change": {"mean": -0.1, "p2_5": -0.14, "p97_5": -0.06}}, "n": 604},
    "metrics/pretrain/curated.json": {"heldout": {"ppl": 7.0}, "noise": {"ppl_halfrange": 0.66}},
    "metrics/summary.json": {"x": 1.0, "x_ci_low": 0.9, "x_ci_high": 1.3, "y": 2.0},
}
HEADLINES = (Headline("sft_readout", "readout", EV, "readout.accuracy", "cis.readout_accuracy.ci_low",
                      "cis.readout_accuracy.ci_high"),
             Headline("ppl", "ppl", "metrics/pretrain/curated.json", "heldout.ppl", noise="noise.ppl_halfrange"))


def test_noise_index_rules():
    idx = noise_index(METRICS, HEADLINES)
    assert idx[(EV, "cis.readout_accuracy.point")] == pytest.approx(0.04)        # sibling CI
    assert idx[(EV, "vs_base.readout_accuracy.diff")] == pytest.approx(0.05)
    assert idx[(EV, "resplit.ece_change.mean")] == pytest.approx(0.04)           # percentile siblings
    assert idx[(EV, "readout.accuracy")] == pytest.approx(0.04)                  # registry: value <- its CI keys
    assert idx[("metrics/pretrain/curated.json", "heldout.ppl")] == pytest.approx(0.66)
    assert idx[("metrics/summary.json", "x")] == pytest.approx(0.2)
    assert (EV, "n") not in idx and ("metrics/summary.json", "y") not in idx
    assert (EV, "cis.readout_accuracy.ci_low") not in idx                        # a bound is not a value


def test_verdicts_and_order():
    diff = {EV: {"cis.readout_accuracy.point": {"old": 0.58, "new": 0.59, "diff": 0.01},
                 "vs_base.readout_accuracy.diff": {"old": 0.18, "new": 0.26, "diff": 0.08},
                 "n": {"old": 604, "new": 600, "diff": -4},
                 "new_key": {"old": None, "new": 1.0}}}
    idx = noise_index(METRICS, HEADLINES)
    rows = metric_rows(diff, idx, {})
    assert [(r["key"], r["verdict"]) for r in rows] == [
        ("vs_base.readout_accuracy.diff", "**outside noise**"), ("cis.readout_accuracy.point", "inside noise"),
        ("n", "deterministic by construction"), ("new_key", "added/removed")]
    assert verdict(-0.05, 0.04) == "**outside noise**" and verdict(0.04, 0.04) == "inside noise"


S1 = "metrics/s1mb/sft.json"
S1MB = {S1: {"task_avg": 0.3, "task_avg_routed": 0.2, "task_scores": {"noul": 0.1}, "n_judgments": 707,
             "cis": {"task_avg": {"point": 0.3, "ci_low": 0.2, "ci_high": 0.4},
                     "task_scores": {"noul": {"point": 0.1, "ci_low": 0.0, "ci_high": 0.3}}},
             "cis_routed": {"task_avg": {"point": 0.2, "ci_low": 0.15, "ci_high": 0.25}}}}


def test_s1mb_scores_are_marked_against_their_item_bootstrap():
    idx = noise_index(S1MB, ())
    assert idx[(S1, "task_avg")] == pytest.approx(0.1)
    assert idx[(S1, "task_scores.noul")] == pytest.approx(0.15)
    assert idx[(S1, "task_avg_routed")] == pytest.approx(0.05)     # cis_routed mirrors the _routed key
    diff = {S1: {"task_avg": {"old": 0.3, "new": 0.45, "diff": 0.15},
                 "task_avg_routed": {"old": 0.2, "new": 0.22, "diff": 0.02},
                 "n_judgments": {"old": 707, "new": 700, "diff": -7}}}
    verdicts = {r["key"]: r["verdict"] for r in metric_rows(diff, idx, {})}
    assert verdicts == {"task_avg": "**outside noise**", "task_avg_routed": "inside noise",
                        "n_judgments": "deterministic by construction"}


def test_larger_half_width_of_the_two_revisions_decides():
    diff = {EV: {"cis.readout_accuracy.point": {"old": 0.58, "new": 0.63, "diff": 0.05}}}
    old = {(EV, "cis.readout_accuracy.point"): 0.04}
    new = {(EV, "cis.readout_accuracy.point"): 0.06}
    assert metric_rows(diff, old, new)[0]["verdict"] == "inside noise"
    assert metric_rows(diff, old, {})[0]["verdict"] == "**outside noise**"


def test_markdown_sections():
    md = review_markdown("main", {"params.yaml": {"sft.lr": {"old": 0.002, "new": 0.004}}},
                         {EV: {"vs_base.readout_accuracy.diff": {"old": 0.18, "new": 0.26, "diff": 0.08},
                               "n": {"old": 604, "new": 600, "diff": -4}}},
                         noise_index(METRICS, HEADLINES), {}, "review/plots")
    assert "| params.yaml | sft.lr | 0.002 | 0.004 |" in md
    assert "2 changed: 1 outside their recorded noise, 0 inside it, 0 with no recorded noise, 1 deterministic" in md
    assert "| metrics/evaluate/sft.json | vs_base.readout_accuracy.diff | 0.18 | 0.26 | 0.08 | 0.05 | **outside noise** |" in md
    assert "<details>" in md and "review/plots/index.html" in md
    empty = review_markdown("main", {}, {}, {}, {})
    assert "No params changed." in empty and "No metric changed." in empty


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


def test_cli_on_a_branch_that_changes_one_param(tmp_path):
    """`make review` on a branch: the param is listed and the metric that moved beyond its CI is flagged."""
    repo = tmp_path / "repo"
    (repo / "metrics/evaluate").mkdir(parents=True)
    (repo / "params.yaml").write_text("sft:\n  lr: 0.002\n")
    (repo / "dvc.yaml").write_text("stages:\n  sft:\n    cmd: 'true'\n    params: [sft]\n"
                                   "    metrics: [metrics/evaluate/sft.json: {cache: false}]\n")
    metrics = {"cis": {"readout_accuracy": {"point": 0.58, "ci_low": 0.54, "ci_high": 0.62},
                       "thinking_accuracy": {"point": 0.34, "ci_low": 0.30, "ci_high": 0.38}}}
    (repo / "metrics/evaluate/sft.json").write_text(json.dumps(metrics))
    _git(repo, "init", "-q", "-b", "main")
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=repo, check=True, capture_output=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "checkout", "-qb", "lr")
    (repo / "params.yaml").write_text("sft:\n  lr: 0.004\n")
    metrics["cis"]["readout_accuracy"]["point"] = 0.66                  # +0.08 > 0.04 half-width
    metrics["cis"]["thinking_accuracy"]["point"] = 0.35                  # +0.01 inside
    (repo / "metrics/evaluate/sft.json").write_text(json.dumps(metrics))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "decision_pipeline.reporting.review", "--base", "main", "--out",
                           "review", "--no-plots"], cwd=repo, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    md = (repo / "review/review.md").read_text()
    assert "| params.yaml | sft.lr | 0.002 | 0.004 |" in md
    assert "| cis.readout_accuracy.point | 0.58 | 0.66 | 0.08 | 0.04 | **outside noise** |" in md
    assert "| cis.thinking_accuracy.point | 0.34 | 0.35 | 0.01 | 0.04 | inside noise |" in md
    bad = subprocess.run([sys.executable, "-m", "decision_pipeline.reporting.review", "--base", "nope"], cwd=repo,
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "--base nope" in bad.stderr


def test_shares_of_n_items_get_their_wilson_half_width():
    # Wilson 95%: z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/(4n^2)); p = .5, n = 100 -> 0.09617; p = 0, n = 568 -> 0.00336
    from decision_pipeline.reporting.review import wilson_halfwidth
    assert wilson_halfwidth(0.5, 100) == pytest.approx(0.09617, abs=1e-5)
    assert wilson_halfwidth(0.0, 568) == pytest.approx(0.003359, abs=1e-6)
    m = {EV: {"n": 100, "thinking": {"parse_rate": 0.5}, "loops": {"rate": 0.0},
              "by_task": {"choice": {"n": 40, "readout": {"accuracy": 0.5, "brier": 0.3}}},
              "by_family": {"count": {"accuracy": 0.5}}, "readout": {"nll": 0.9}}}
    idx = noise_index(m, ())
    assert idx[(EV, "thinking.parse_rate")] == pytest.approx(0.09617, abs=1e-5)   # the file's n
    assert idx[(EV, "by_task.choice.readout.accuracy")] == pytest.approx(wilson_halfwidth(0.5, 40))  # its block's n
    assert (EV, "by_family.count.accuracy") not in idx     # a by_* member without its own n: not the file's 100
    assert (EV, "by_task.choice.readout.brier") not in idx and (EV, "readout.nll") not in idx   # not shares


def test_seed_spread_and_bounds_are_not_rows():
    cur = "metrics/pretrain/curated.json"
    m = {cur: {"heldout": {"ppl": 6.1}, "seeds": {"ppl": [5.7, 6.1, 6.5], "ppl_mean": 6.1, "ppl_min": 5.7,
                                                   "ppl_max": 6.5, "ppl_halfrange": 0.4}}}
    idx = noise_index(m, ())
    assert idx[(cur, "seeds.ppl_mean")] == pytest.approx(0.4) and idx[(cur, "heldout.ppl")] == pytest.approx(0.4)
    diff = {cur: {"seeds.ppl_mean": {"old": 6.0, "new": 6.1, "diff": 0.1}, "seeds.ppl_max": {"old": 6.4, "new": 6.5},
                  "cis.x.ci_low": {"old": 0.1, "new": 0.2}},
            "metrics/summary.json": {"a_ci_high": {"old": 1.0, "new": 1.1}, "a_noise": {"old": 0.1, "new": 0.2}}}
    rows = metric_rows(diff, idx, idx)
    assert [(r["key"], r["verdict"]) for r in rows] == [("seeds.ppl_mean", "inside noise")]

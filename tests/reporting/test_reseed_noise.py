"""Reseed noise (#25.5): half-ranges over whole-chain reruns, read back from `dvc exp show`, used by the
review for the metrics that have no noise of their own."""
from __future__ import annotations

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.reseed_noise import NOISE_FILE, collect, halfranges, queue_commands
from decision_pipeline.reporting.review import coverage, metric_rows, noise_index

EV = "metrics/evaluate/sft.json"


def test_halfranges_hand_computed():
    runs = [{EV: {"x": 1, "b": {"y": 2.0}, "s": "text", "flag": True}, "only_here.json": {"x": 1}},
            {EV: {"x": 4, "b": {"y": 2.0}, "z": 5}},
            {EV: {"x": 2, "b": {"y": 2.0}, "z": 7}}]
    # x: (4 - 1) / 2; y never moved; z is missing from one run, strings and booleans are not metrics
    assert halfranges(runs) == {EV: {"b.y": 0.0, "x": 1.5}}
    # a count table leaves out zero entries: "lookup" missing from run 1 is a count of 0 there
    counts = [{EV: {"drops": {"loop": 10, "lookup": 4}, "mean": {"a": 0.5}}},
              {EV: {"drops": {"loop": 12}, "mean": {"a": 0.7, "b": 0.1}}}]
    assert halfranges(counts) == {EV: {"drops.lookup": 2.0, "drops.loop": 1.0, "mean.a": 0.1}}
    with pytest.raises(PipelineError, match="need the baseline and >= 1 reseeded experiment"):
        halfranges(runs[:1])


def _rev(name, seed, metrics, lr=0.1):
    return {"rev": f"{name}-sha", "name": name, "data": {
        "params": {"params.yaml": {"data": {"base": {"seed": seed}, "sft": {"lr": lr}}}},
        "metrics": {path: {"data": data} for path, data in metrics.items()}}}


def _show(base_rev, *exps):
    base = _rev("main", 1234, {EV: {"nll": 1.0}})
    base["rev"] = base_rev
    base["experiments"] = [{"name": e["name"], "revs": [e]} for e in exps]
    return [{"rev": "workspace", "name": None, "data": {"params": {}}}, base]


def test_collect_reads_reseeded_experiments_and_refuses_other_changes():
    shows = [_show("aaa", _rev("reseed-1235", 1235, {EV: {"nll": 1.4}}), _rev("curate-docs-of1", 1234, {EV: {"nll": 9}}),
                   _rev("reseed-1236", 1236, {EV: {"nll": 0.8}})),
             _show("bbb", _rev("reseed-1235", 1235, {EV: {"nll": 5.0}}))]
    noise = collect(shows, prefer="aaa")
    assert noise["baseline"] == "aaa" and noise["seeds"] == [1234, 1235, 1236] and noise["runs"] == 3
    assert noise["halfrange"] == {EV: {"nll": 0.3}}           # (1.4 - 0.8) / 2; the ablation run is not a reseed
    assert collect(shows, prefer="bbb")["halfrange"] == {EV: {"nll": 2.0}}
    bad = [_show("aaa", _rev("reseed-1235", 1235, {EV: {"nll": 1.4}}, lr=0.2))]
    with pytest.raises(PipelineError, match="reseed-1235 changes params other than base.seed"):
        collect(bad)
    with pytest.raises(PipelineError, match="no experiment named reseed-<seed> has results"):
        collect([_show("aaa")])
    assert queue_commands([7]) == [["dvc", "exp", "run", "--queue", "--name", "reseed-7", "-S", "base.seed=7"]]


def test_review_uses_reseed_noise_only_where_nothing_else_applies():
    m = {EV: {"n": 100, "readout": {"accuracy": 0.5, "nll": 0.9, "n_items": 100}, "temperature": 1.3},
         NOISE_FILE: {"halfrange": {EV: {"readout.accuracy": 0.5, "readout.nll": 0.05},
                                    "metrics/gone.json": {"x": 1.0}}}}
    idx = noise_index(m, ())
    assert idx[(EV, "readout.accuracy")] == pytest.approx(0.09617, abs=1e-5)   # its own Wilson interval wins
    assert idx[(EV, "readout.nll")] == 0.05 and ("metrics/gone.json", "x") not in idx
    rows = metric_rows({EV: {"readout.nll": {"old": 0.9, "new": 1.0, "diff": 0.1},
                             "temperature": {"old": 1.2, "new": 1.3, "diff": 0.1}}}, idx, idx)
    assert [(r["key"], r["verdict"]) for r in rows] == [("readout.nll", "**outside noise**"),
                                                        ("temperature", "no recorded noise")]
    cov = coverage(m, idx)
    assert (cov["metrics"], cov["with_noise"], cov["deterministic"]) == (5, 2, 2) and cov["none"] == [f"{EV}:temperature"]


def test_committed_metrics_all_have_noise_or_are_deterministic():
    """The review of any change to the committed run can read every metric against a noise (#25.5)."""
    import json
    import subprocess
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(["python", "-m", "decision_pipeline.reporting.review", "--coverage"], cwd=root,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " 0 with neither" in proc.stdout.strip().splitlines()[-1]
    noise = json.loads((root / NOISE_FILE).read_text())
    assert noise["runs"] >= 2 and len(set(noise["seeds"])) == noise["runs"]

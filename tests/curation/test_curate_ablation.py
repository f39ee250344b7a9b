"""The ablation grid: 5 overfills x 3 modes, each a named queued experiment on pretrain@curated,
and the results table read back from `dvc exp show --json`."""
from __future__ import annotations

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "curate_ablation", Path(__file__).resolve().parents[2] / "scripts" / "curate_ablation.py")
ablation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation)


def test_grid_and_commands():
    cmds = ablation.commands()
    assert len(cmds) == 15 and len({c[5] for c in cmds}) == 15
    assert cmds[0] == ["dvc", "exp", "run", "--queue", "--name", "curate-docs-of1",
                       "-S", "curate.mode=docs", "-S", "curate.overfill=1.0", "pretrain@curated"]
    assert cmds[-1][5] == "curate-pooled-of4p5"
    micro = ablation.commands(overfills=(2.2,), modes=("tokens",), extra=ablation.MICRO)
    assert micro == [["dvc", "exp", "run", "--queue", "--name", "curate-tokens-of2p2", "-S", "curate.mode=tokens",
                      "-S", "curate.overfill=2.2", "-S", "curate.budget_tokens=15000", "-S", "curate.reserve=0.1",
                      "pretrain@curated"]]


def _exp(name, mode, overfill, ppl):
    seeds = {"n": len(ppl), "ppl": ppl, "ppl_mean": sum(ppl) / len(ppl), "ppl_min": min(ppl), "ppl_max": max(ppl)}
    return {"rev": name * 2, "name": name, "data": {
        "params": {"params.yaml": {"data": {"curate": {"mode": mode, "overfill": overfill}}}},
        "metrics": {"metrics/pretrain/curated.json": {"data": {"seeds": seeds}},
                    "metrics/curate/curated.json": {"data": {"fallback_docs": 0 if overfill > 1 else 7,
                                                             "selected_docs": 10}}}}}


def test_collect_reads_the_grid_back_from_exp_show():
    # the shape `dvc exp show --json` nests experiments in: baseline -> experiments -> revs
    show = [{"rev": "workspace", "name": None, "data": {"params": {}}, "experiments": None},
            {"rev": "abc", "name": "main", "data": {"params": {}}, "experiments": [
                {"name": "curate-docs-of2p2", "revs": [_exp("curate-docs-of2p2", "docs", 2.2, [6.0, 7.0])]},
                {"name": "curate-pooled-of1", "revs": [_exp("curate-pooled-of1", "pooled", 1.0, [9.0])]},
                {"name": "curate-docs-of1", "revs": [_exp("curate-docs-of1", "docs", 1.0, [5.0, 6.0, 7.0])]},
                {"name": "other-exp", "revs": [_exp("other-exp", "docs", 3.2, [1.0])]},
                {"name": "curate-docs-of4p5", "revs": [{"rev": "q", "name": "curate-docs-of4p5",
                                                        "data": {"params": {}, "metrics": {}}}]}]}]
    table = ablation.collect(show)
    rows = table["rows"]
    assert [(r["mode"], r["overfill"]) for r in rows] == [("docs", 1.0), ("docs", 2.2), ("pooled", 1.0)]
    assert rows[0]["ppl_mean"] == 6.0 and rows[0]["ppl_min"] == 5.0 and rows[0]["ppl_max"] == 7.0
    assert rows[0]["fallback_docs"] == 7 and rows[1]["fallback_docs"] == 0 and rows[0]["seeds"] == 3

"""The ablation grid: 5 overfills x 3 modes, each a named queued experiment on the pretrain stages."""
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
                       "-S", "curate.mode=docs", "-S", "curate.overfill=1.0", "pretrain"]
    assert cmds[-1][5] == "curate-pooled-of4p5"
    micro = ablation.commands(overfills=(2.2,), modes=("tokens",), extra=ablation.MICRO)
    assert micro == [["dvc", "exp", "run", "--queue", "--name", "curate-tokens-of2p2", "-S", "curate.mode=tokens",
                      "-S", "curate.overfill=2.2", "-S", "curate.budget_tokens=15000", "-S", "curate.reserve=0.1",
                      "pretrain"]]

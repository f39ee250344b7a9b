"""The `lr_sweep` stage tracks every `sft` key its short runs read.

Why: the sweep lists ~20 dotted `sft.*` keys in dvc.yaml instead of the whole section (so a change
of the final run's lr or steps does not rerun the sweep). A key added to SFTParams and forgotten
there would leave the sweep's results stale with no warning; this test names it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from decision_pipeline.decision.sft.config import SFT_KEYS_THE_SWEEP_IGNORES, SFTParams

ROOT = Path(__file__).resolve().parents[2]


def _sweep_params() -> set[str]:
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["lr_sweep"]["do"]
    return {p for p in stage["params"] if isinstance(p, str)}


def test_lr_sweep_tracks_every_sft_key_it_reads():
    fields = {f.name for f in dataclasses.fields(SFTParams)}
    tracked = {p.split(".", 1)[1] for p in _sweep_params() if p.startswith("sft.")}
    missing = sorted(fields - SFT_KEYS_THE_SWEEP_IGNORES - tracked)
    assert not missing, f"add to lr_sweep's params in dvc.yaml: {', '.join('sft.' + m for m in missing)}"
    unknown = sorted(tracked - fields)
    assert not unknown, f"lr_sweep tracks sft keys SFTParams does not have: {unknown}"
    assert not tracked & SFT_KEYS_THE_SWEEP_IGNORES, "a key the sweep ignores is tracked (reruns it for nothing)"

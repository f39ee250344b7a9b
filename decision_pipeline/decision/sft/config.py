"""The learning-rate sweep's config and rule, kept free of torch so `choose_lr` starts in a blink."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import read_json
from decision_pipeline.common.params import rule


# `sft` keys the short runs do not read: the sweep sets its own rate and step count, and the
# lr source and seed offset only matter to the final run. Every other `sft` key must be in
# lr_sweep's dvc.yaml params (tests/pipeline/test_stage_params.py), or a change to it leaves
# the sweep's results stale.
SFT_KEYS_THE_SWEEP_IGNORES = frozenset({"lr_source", "lr", "max_steps", "seed_offset"})


@dataclass
class LrSweepParams:
    """params.yaml `lr_sweep`: short SFT runs that choose the learning rate."""
    lrs: list[float] = rule(gt=0.0, nonempty=True, doc="learning rates tried (one lr_sweep@<lr> stage each)")
    max_steps: int = rule(min=1, doc="steps of each short run")
    max_examples: int = rule(min=1, doc="training examples of each short run (the same seeded subset)")


def lr_rule(results: dict[float, float]) -> float:
    """The learning rate with the lowest dev NLL; ties (to 1e-6) go to the lower rate."""
    best = min(round(v, 6) for v in results.values())
    return min(lr for lr, v in results.items() if round(v, 6) == best)


def sweep_file(sweep_dir: str, lr: float) -> str:
    """Where lr_sweep@<lr> writes its metrics (one name, used by both stages' dvc.yaml entries)."""
    return f"{sweep_dir}/{lr:g}.json"


def sweep_nll(path: str) -> float:
    """The dev NLL a sweep file records; a missing key or a non-finite value names the file (a NaN
    would otherwise make `lr_rule` pick nothing)."""
    data = read_json(path)
    nll = data.get("dev", {}).get("nll") if isinstance(data, dict) and isinstance(data.get("dev"), dict) else None
    if isinstance(nll, bool) or not isinstance(nll, (int, float)) or not math.isfinite(nll):
        raise PipelineError(f"{path}: dev.nll is {nll!r}, not a finite number; rerun that lr_sweep stage")
    return float(nll)


def choose_lr(lrs: list[float], sweep_dir: str) -> dict:
    """Read each rate's dev NLL and apply `lr_rule`; a missing sweep file names the rate to rerun."""
    results = {}
    for lr in lrs:
        path = sweep_file(sweep_dir, lr)
        if not Path(path).is_file():
            raise PipelineError(f"{path}: missing; run `dvc repro lr_sweep@{lr:g}`")
        results[lr] = sweep_nll(path)
    chosen = lr_rule(results)
    return {"chosen_lr": chosen, "rule": "lowest dev NLL, ties to the lower rate",
            "dev_nll": {f"{lr:g}": v for lr, v in sorted(results.items())}}

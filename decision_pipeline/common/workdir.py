"""One resume scheme for every long stage: a work directory that belongs to one run.

Why one module: pretraining, SFT, RL and generation each kept their own rule for "may these
checkpoints (or log lines) be resumed", and which params may change without invalidating them
was written three ways (two RUN_CONTROL tuples and an inline tuple) and not at all for SFT,
whose fingerprint hashed `threads`. Here:

- a params field that only decides how a run is carried out (threads, save cadence, memory
  knobs, budgets that stop a run early) is marked `rule(run_control=True)` on its dataclass, and
  `content_params` drops exactly those from what a run is identified by;
- `claim` makes a directory belong to a run: same fingerprint -> resume; another run's
  directory is removed (its checkpoints must never be resumed into this run) and the parts that
  changed are named;
- `last_step` finds the newest complete `checkpoint-<step>` (one sealed by a marker file
  written after everything else, so a kill mid-save leaves an incomplete one that is skipped).
"""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any, Mapping

from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.common.log import info

MARKER = "fingerprint.json"


def run_control_fields(cls: type) -> frozenset[str]:
    """Fields of a params dataclass marked `run_control`: they may change between a run and its resume."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("run_control"))


def content_params(params: Any) -> dict:
    """The params that decide what a run computes: every field but the run-control ones."""
    skip = run_control_fields(type(params))
    return {k: v for k, v in dataclasses.asdict(params).items() if k not in skip}


def claim(work: str | Path, parts: Mapping[str, str] | str, stage: str = "") -> bool:
    """Make `work` belong to the run identified by `parts` (name -> hash, or one hash); True = resume.

    A directory left by another run is removed, saying which parts changed.
    """
    work = Path(work)
    parts = {"run": parts} if isinstance(parts, str) else dict(parts)
    marker = work / MARKER
    old = json.loads(marker.read_text()) if marker.is_file() else None
    resumed = old == parts
    if work.exists() and not resumed:
        if old is not None:
            changed = sorted(k for k in set(old) | set(parts) if old.get(k) != parts.get(k))
            info(stage or "workdir", f"{work}: belongs to another run (changed: {', '.join(changed)}); starting afresh")
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    write_text_atomic(marker, json.dumps(parts, sort_keys=True) + "\n")
    return resumed


def last_step(work: str | Path, sealed_by: str) -> int:
    """The newest `checkpoint-<step>` holding the file `sealed_by` (0 when none is complete)."""
    steps = [int(c.name.split("-", 1)[1]) for c in Path(work).glob("checkpoint-*")
             if c.name.split("-", 1)[1].isdigit() and (c / sealed_by).is_file()]
    return max(steps, default=0)

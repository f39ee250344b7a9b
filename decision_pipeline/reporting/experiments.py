"""Reading DVC experiments back: `dvc exp show --json` records and the commits they were run from.

Why a module: the curation ablation (scripts/curate_ablation.py) and the reseed noise
(reporting/reseed_noise.py) both queue experiments with `dvc exp run --queue` and read their
metrics back; the runs are DVC's, only the reading lives here.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any


def experiments(obj: Any) -> Iterator[dict]:
    """Every experiment record in `dvc exp show --json` output (a nested list/dict tree)."""
    if isinstance(obj, dict):
        if isinstance(obj.get("name"), str) and isinstance(obj.get("data"), dict) and "params" in obj["data"]:
            yield obj
        for v in obj.values():
            yield from experiments(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from experiments(v)


def file_data(data: dict, kind: str, path: str) -> dict:
    """One params or metrics file's parsed content inside an experiment's `data` ({} when absent)."""
    return ((data.get(kind) or {}).get(path) or {}).get("data") or {}


def baselines() -> list[str]:
    """The commits experiments were run from (refs/exps/<2 hex>/<rest of the sha>/<name>): a queued grid
    keeps its baseline when main moves on, and `dvc exp show` lists only HEAD's by default."""
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/exps"], check=True,
                          capture_output=True, text=True).stdout.split()
    parts = [r.split("/") for r in refs]
    return sorted({p[2] + p[3] for p in parts if len(p) == 5 and len(p[2] + p[3]) == 40})


def exp_show(rev: str) -> Any:
    """`dvc exp show --json --rev REV`, parsed."""
    return json.loads(subprocess.run(["dvc", "exp", "show", "--json", "--rev", rev], check=True,
                                     capture_output=True, text=True).stdout)

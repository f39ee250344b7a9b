"""Per-metric spread over runs: n, sd, half-range and mean of every numeric leaf of the metrics files.

Why a module: the noise study (reporting/review/noise_study.py) measures it per source and the review
(reporting/review/diff.py) reads it back; both must flatten the files the same way. A key counts when it
is numeric in every run, or when it is an entry of a count table that some runs leave out because it
is 0 (a drop reason that did not occur): then it counts as 0 there.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of nested dicts as {dotted.key: value} (lists kept whole), as `dvc params diff` names them."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obj}


def flatten_numbers(obj: Any, prefix: str = "") -> dict[str, float]:
    """Finite numeric leaves of nested dicts as {dotted.key: value} (lists, strings and booleans skipped)."""
    return {k: float(v) for k, v in flatten(obj, prefix).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _count_missing_as_zero(flats: Sequence[dict[str, float]], key: str) -> list[float] | None:
    """The key's value in every run, a missing entry of a count table read as 0; None if not a count."""
    parent = key.rpartition(".")[0] + "."
    values = []
    for flat in flats:
        if key in flat:
            if not float(flat[key]).is_integer():
                return None
            values.append(flat[key])
        elif parent != "." and any(k.startswith(parent) for k in flat):
            values.append(0.0)
        else:
            return None
    return values


def describe(values: Sequence[float]) -> dict[str, float | int]:
    """n, sample sd, half-range (max - min) / 2 and mean, to 6 significant digits."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    g = (lambda v: float(f"{v:.6g}"))
    return {"n": n, "sd": g(sd), "halfrange": g((max(values) - min(values)) / 2), "mean": g(mean)}


def spreads(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict]]:
    """{metrics file: {key: describe(values over runs)}} for the files every run has."""
    out: dict[str, dict[str, dict]] = {}
    for path in sorted(set.intersection(*(set(r) for r in runs))):
        flats = [flatten_numbers(r[path]) for r in runs]
        spread = {}
        for k in sorted(set.union(*(set(f) for f in flats))):
            values = [f[k] for f in flats] if all(k in f for f in flats) else _count_missing_as_zero(flats, k)
            if values is not None:
                spread[k] = describe(values)
        out[path] = spread
    return out

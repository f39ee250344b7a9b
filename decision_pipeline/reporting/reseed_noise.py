"""Reseed noise: how far every metric moves when the whole chain reruns under another `base.seed`.

Why: many metrics carry a noise of their own (item-bootstrap CIs, seed ranges, Wilson intervals of
shares; see reporting/review.py), but many cannot: per-family Brier and ECE, fitted temperatures,
kept-chain counts, per-register perplexities, judge agreement. Rerunning the whole chain under other
seeds (the synthetic documents and questions, every initialisation, data order, sampled chain and
judge verdict) and taking each number's half-range (max - min) / 2 measures what a reviewer asks:
would this number have moved if nothing but chance had changed?

    python -m decision_pipeline.reporting.reseed_noise --queue      # dvc exp run --queue -S base.seed=S
    dvc exp run --run-all --jobs 1                                  # the whole chain per seed (~45 min, 2 cores)
    python -m decision_pipeline.reporting.reseed_noise --collect    # -> metrics/noise_reseed.json

Runs: the baseline commit's own metrics (its `base.seed`) and every experiment named `reseed-<seed>`
run from it whose params differ from the baseline's in `base.seed` only. With 2-3 runs a half-range
is a rough spread, not a CI: the review uses it only for a metric with no noise of its own.
A key present in some runs only gets no half-range, unless it is an entry of a count table that a
run leaves out because it is 0 (a drop reason that did not occur): then it counts as 0 there.
"""
from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.reporting.experiments import baselines, exp_show, experiments, file_data

NOISE_FILE = "metrics/noise_reseed.json"
PREFIX = "reseed-"
DEFAULT_SEEDS = (1235, 1236)


def flatten_numbers(obj: Any, prefix: str = "") -> dict[str, float]:
    """Finite numeric leaves of nested dicts as {dotted.key: value} (lists and strings skipped)."""
    if isinstance(obj, dict):
        out: dict[str, float] = {}
        for k, v in obj.items():
            out.update(flatten_numbers(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(obj, (int, float)) and not isinstance(obj, bool) and obj == obj and abs(obj) != float("inf"):
        return {prefix: float(obj)}
    return {}


def _count_missing_as_zero(flats: Sequence[dict[str, float]], key: str) -> list[float] | None:
    """The key's value in every run, a missing entry of a count table read as 0; None if not a count.

    Count tables (drop reasons, flags, per-reason tallies) are Counters that leave out zero
    entries: a key missing from a run whose table exists is a count of 0, not an unknown.
    """
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


def halfranges(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """{metrics file: {key: (max - min) / 2}} over the runs ({file: parsed JSON} each).

    A key counts when it is numeric in every run, or when it is an entry of a count table that some
    runs leave out because it is 0 (`_count_missing_as_zero`).
    """
    if len(runs) < 2:
        raise PipelineError(f"reseed noise: {len(runs)} run(s); need the baseline and >= 1 reseeded experiment "
                            "(python -m decision_pipeline.reporting.reseed_noise --queue, then dvc exp run --run-all)")
    out: dict[str, dict[str, float]] = {}
    for path in sorted(set.intersection(*(set(r) for r in runs))):
        flats = [flatten_numbers(r[path]) for r in runs]
        keys = set.union(*(set(f) for f in flats))
        spread = {}
        for k in sorted(keys):
            values = [f[k] for f in flats] if all(k in f for f in flats) else _count_missing_as_zero(flats, k)
            if values is not None:
                spread[k] = float(f"{(max(values) - min(values)) / 2:.6g}")
        out[path] = spread
    return out


def _without_seed(params: dict) -> dict:
    p = copy.deepcopy(params)
    (p.get("base") or {}).pop("seed", None)
    return p


def _metrics(data: dict) -> dict[str, Any]:
    return {path: v["data"] for path, v in (data.get("metrics") or {}).items()
            if isinstance(v, dict) and isinstance(v.get("data"), dict) and path != NOISE_FILE}


def collect(shows: Sequence[Any], prefer: str | None = None) -> dict:
    """The noise file from `dvc exp show --json` outputs: baseline `prefer` (HEAD) if it has reseeded
    experiments with results, else the last baseline that has."""
    best = None
    for show in shows:
        for base in show if isinstance(show, list) else [show]:
            if not isinstance(base, dict) or base.get("rev") == "workspace" or "data" not in base:
                continue
            runs = [exp for exp in experiments(base.get("experiments") or [])
                    if exp["name"].startswith(PREFIX) and _metrics(exp["data"])]
            if runs and (best is None or best[0]["rev"] != prefer):
                best = (base, runs)
    if best is None:
        raise PipelineError("reseed noise: no experiment named reseed-<seed> has results; queue and run them "
                            "first (--queue, then dvc exp run --run-all --jobs 1)")
    base, runs = best
    base_params = file_data(base["data"], "params", "params.yaml")
    seeds = [(base_params.get("base") or {}).get("seed")]
    for exp in runs:
        params = file_data(exp["data"], "params", "params.yaml")
        if _without_seed(params) != _without_seed(base_params):
            raise PipelineError(f"reseed noise: experiment {exp['name']} changes params other than base.seed; "
                                f"remove it (dvc exp remove {exp['name']}) and queue reseeds from one commit")
        seeds.append((params.get("base") or {}).get("seed"))
    return {"source": f"dvc exp show: baseline {base['rev'][:12]} and {len(runs)} reseeded experiment(s)",
            "baseline": base["rev"], "seeds": seeds, "runs": len(seeds),
            "halfrange": halfranges([_metrics(base["data"])] + [_metrics(e["data"]) for e in runs])}


def queue_commands(seeds: Sequence[int]) -> list[list[str]]:
    """One `dvc exp run --queue` per seed: the whole pipeline (no target), only base.seed changed."""
    return [["dvc", "exp", "run", "--queue", "--name", f"{PREFIX}{s}", "-S", f"base.seed={s}"] for s in seeds]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queue", action="store_true", help="queue one whole-chain experiment per --seeds")
    ap.add_argument("--seeds", nargs="+", type=int, default=list(DEFAULT_SEEDS))
    ap.add_argument("--collect", action="store_true", help=f"read the experiments back into {NOISE_FILE}")
    ap.add_argument("--out", default=NOISE_FILE)
    args = ap.parse_args(argv)
    try:
        if args.collect:
            head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
            noise = collect([exp_show(rev) for rev in baselines()], prefer=head)
            write_text_atomic(Path(args.out), json.dumps(noise, indent=1, sort_keys=True) + "\n")
            n = sum(len(v) for v in noise["halfrange"].values())
            print(f"[reseed_noise] {args.out}: {n} metrics over {noise['runs']} runs (seeds {noise['seeds']})")
            return 0
        for cmd in queue_commands(args.seeds):
            print(" ".join(cmd))
            if args.queue:
                subprocess.run(cmd, check=True)
    except (PipelineError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The Borda cohort: reference scorers every run ranks against, and the export of a run's models into it.

Why: Borda ranks a model within a cohort; with `s1mb.cohort_dir: ''` it was never computed. Three
reference scorers that need no model are derived from the benchmark set itself, in every run, so
the cohort always exists and can never go stale against the set: `uniform` (equal mass on every
option), `label-prior` (per benchmark, the mean target mass at each option position over its
questions with that option count) and `majority` (all mass on the prior's most likely position).
`s1mb.cohort_dir` adds published model folders on top (e.g. `configs/s1mb_cohort/`, filled by
`make cohort` from a run's base/SFT/RL folders); a folder there missing a benchmark is refused.

    python -m decision_pipeline cohort --from data/s1mb --out configs/s1mb_cohort   # make cohort
"""
from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from decision_pipeline.bench.noise import Scored
from decision_pipeline.bench.s1mb import BenchmarkScore
from decision_pipeline.bench.s1mb.aggregate import eligible
from decision_pipeline.bench.s1mb.metrics import score_decisions
from decision_pipeline.bench.s1mb.records import Decision, Prediction
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import atomic_dir

REFERENCES = ("uniform", "label-prior", "majority")
REFERENCE_ORG = "reference"


def _prior(decisions: Sequence[Decision]) -> dict[int, np.ndarray]:
    """Mean target vector by option position, per option count."""
    sums: dict[int, np.ndarray] = {}
    counts: dict[int, int] = {}
    for d in decisions:
        k = len(d.options)
        sums[k] = sums.get(k, np.zeros(k)) + np.array([float(d.target.get(o, 0.0)) for o in d.options])
        counts[k] = counts.get(k, 0) + 1
    return {k: v / max(v.sum(), 1e-12) for k, v in sums.items()}


def reference_predictions(kind: str, decisions: Sequence[Decision]) -> list[Prediction]:
    """One reference scorer's predictions for a benchmark's decisions."""
    prior = _prior(decisions)
    out = []
    for d in decisions:
        k = len(d.options)
        if kind == "uniform":
            p = np.full(k, 1.0 / k)
        elif kind == "label-prior":
            p = prior[k]
        elif kind == "majority":
            p = np.zeros(k)
            p[int(np.argmax(prior[k]))] = 1.0
        else:
            raise ValueError(f"unknown reference scorer {kind!r}; use one of {REFERENCES}")
        out.append(Prediction(d.case_id, d.question_id, {o: float(v) for o, v in zip(d.options, p)}))
    return out


def reference_scores(scored: Sequence[Scored]) -> dict[str, dict[str, BenchmarkScore]]:
    """`{reference__<kind>: {benchmark: BenchmarkScore}}` over the benchmarks a model was scored on."""
    out: dict[str, dict[str, BenchmarkScore]] = {}
    for kind in REFERENCES:
        scores = {}
        for s in scored:
            m = score_decisions(s.task, s.decisions, reference_predictions(kind, s.decisions), s.benchmark)
            scores[s.benchmark] = BenchmarkScore(s.task, m["baseline_adjusted_score"], eligible(s.task, m))
        out[f"{REFERENCE_ORG}__{kind}"] = scores
    return out


def check_complete(cohort_dir: str | Path, folders: Mapping[str, Mapping[str, object]], benchmarks: Sequence[str]) -> None:
    """Every cohort folder holds a result for every benchmark of the category (else Borda silently drops it)."""
    for name, results in sorted(folders.items()):
        missing = [b for b in benchmarks if b not in results]
        if missing:
            raise PipelineError(f"{Path(cohort_dir) / name}: no result for benchmark {missing[0]!r} "
                                f"({len(missing)} of {len(benchmarks)} missing); export the model on every benchmark "
                                "of the category or remove the folder from s1mb.cohort_dir")


def export(src: str | Path, out: str | Path, models: Sequence[str]) -> list[str]:
    """Copy each `<src>/<model>/pipeline__*` folder (readout and routed) into `out`, replacing older copies."""
    src, out = Path(src), Path(out)
    copied = []
    for m in models:
        folders = sorted((src / m).glob("pipeline__*")) if (src / m).is_dir() else []
        if not folders:
            raise PipelineError(f"{src / m}: no pipeline__* model folder; run `dvc repro s1mb@{m}` first")
        for f in folders:
            with atomic_dir(out / f.name) as tmp:
                shutil.copytree(f, tmp, dirs_exist_ok=True)
            copied.append(f.name)
    return copied


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="src", default="data/s1mb", help="the s1mb stages' output root")
    ap.add_argument("--out", default="configs/s1mb_cohort")
    ap.add_argument("--models", nargs="+", default=["base", "sft", "rl"])
    args = ap.parse_args(argv)
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        print(f"cohort: {', '.join(export(args.src, args.out, args.models))} -> {args.out}")
    except PipelineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


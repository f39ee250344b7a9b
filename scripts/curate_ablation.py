"""The curation research's ablations as DVC experiments, read on the tune set (issues 23.6, 35.5).

    python scripts/curate_ablation.py                      # print the commands (dry run)
    python scripts/curate_ablation.py --queue              # queue them: dvc exp run --queue -S ... pipelines/curation/dvc.yaml:pretrain@curated
    dvc exp run --run-all --jobs 1                         # run the queue (each: curate + pretrain@curated, all seeds)
    python scripts/curate_ablation.py --collect            # the experiments' git trees -> metrics/curate_ablation.json

The grid: the `docs` rule at the research's depths (overfill 1.0 ... 4.5), M4 (one `pooled` ranking by
the summed register probabilities instead of per-register lists) and M6 (`tokens` quotas set to the
committed docs selection's own register mix, so it reproduces the winner's mix by token share instead
of document count). Every point is read on the tune set's perplexity (`tune_seeds`, ingest's tune
split): knobs are chosen there and the held-out set stays for the headline. Each point is compared
with the committed run seed by seed (the arms share init and order seeds) through common/verdict.py:
with `pretrain.seeds` < 5 a point says "not tested" rather than a verdict.

Each experiment reruns only what the change reaches on the way to `pretrain@curated`, so a point costs
one curated selection and its pretraining over `pretrain.seeds`. `--profile micro` adds the micro
profile's budget for a CI-sized variant. Only the grid and the commands live here; the runs are DVC's.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.common.verdict import seed_verdict
from decision_pipeline.reporting.review.git_runs import exp_refs_by_name, first_difference, metrics_at, params_at

OVERFILLS = (1.0, 1.6, 2.2, 3.2, 4.5)   # the research's depths
MODES = ("docs", "tokens", "pooled")
MICRO = ("curate.budget_tokens=15000", "curate.reserve=0.1")
PPL = "metrics/pretrain/curated.json"
CURATE = "metrics/curate/curated.json"
PREFIX = "curate-"


def winner_mix(curate_metrics: dict) -> dict[str, float]:
    """The committed docs selection's token share per picking list (rounded, summing to 1): M6's quotas."""
    mix = curate_metrics.get("register_mix") or {}
    tokens = {r: int(v.get("tokens", 0)) for r, v in mix.items()}
    total = sum(tokens.values())
    if not total:
        raise PipelineError(f"{CURATE}: register_mix has no tokens; run `dvc repro pipelines/curation/dvc.yaml:curate@curated` first")
    shares = {r: round(t / total, 4) for r, t in tokens.items()}
    last = max(shares, key=shares.get)
    shares[last] = round(shares[last] + 1 - sum(shares.values()), 4)  # the rounding remainder
    return shares


def grid(mix: dict[str, float], overfills=OVERFILLS) -> dict[str, list[str]]:
    """{experiment name: -S overrides}: docs x overfills, M4 pooled, M6 tokens at the winner's mix."""
    out = {f"{PREFIX}docs-of{of:g}".replace(".", "p"): ["curate.mode=docs", f"curate.overfill={of}"]
           for of in overfills}
    out[f"{PREFIX}m4-pooled"] = ["curate.mode=pooled", "curate.overfill=1.0"]
    weights = ",".join(f"{r}:{w}" for r, w in sorted(mix.items()))
    # `++`: Hydra's add-or-override; plain `curate.weights={...}` is refused while params.yaml holds `{}`
    out[f"{PREFIX}m6-tokens"] = ["curate.mode=tokens", "curate.overfill=1.0", f"++curate.weights={{{weights}}}"]
    return out


#: DVC's address of the stage each experiment reproduces (a stage of the curation part, pipelines/curation/)
TARGET = "pipelines/curation/dvc.yaml:pretrain@curated"


def command(name: str, sets: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    return ["dvc", "exp", "run", "--queue", "--name", name, *[a for s in (*sets, *extra) for a in ("-S", s)],
            TARGET]


def row(name: str, params: dict, metrics: dict, base: dict) -> dict:
    """One grid point: its tune-set ppl over seeds and the paired difference with the committed run."""
    tune = (metrics.get(PPL) or {}).get("tune_seeds") or {}
    base_tune = (base.get(PPL) or {}).get("tune_seeds") or {}
    if "ppl" not in tune:
        raise PipelineError(f"{name}: {PPL} has no tune_seeds (the run failed or predates the tune set); "
                            f"rerun it or remove it (dvc exp remove {name})")
    cur, curate = metrics.get(CURATE) or {}, params.get("curate") or {}
    vs = seed_verdict([a - b for a, b in zip(tune["ppl"], base_tune.get("ppl") or [])],
                      noise_source="sd of the per-seed differences with the committed run")
    return {"experiment": name, "mode": curate.get("mode"), "overfill": curate.get("overfill"),
            "weights": curate.get("weights") or None, "seeds": tune.get("n"), "ppl_mean": tune["ppl_mean"],
            "ppl_min": min(tune["ppl"]), "ppl_max": max(tune["ppl"]),
            "ppl_equal_registers_mean": tune.get("ppl_equal_registers_mean"), "bpb_mean": tune.get("bpb_mean"),
            "selected_docs": cur.get("selected_docs"), "fallback_docs": cur.get("fallback_docs"),
            "fallback_share": cur.get("fallback_share"), "vs_committed": vs}


GRID_KEYS = ("mode", "overfill", "weights")  # what a grid point may change in `curate`


def _without_grid_keys(params: dict) -> dict:
    return {**params, "curate": {k: v for k, v in (params.get("curate") or {}).items() if k not in GRID_KEYS}}


def collect(baseline: str, names: list[str]) -> dict:
    """The results table of the grid's experiments, each found by name under any baseline commit (points
    run across commits that left the params alone); a missing or confounded one is one line."""
    refs, base = exp_refs_by_name(), metrics_at(baseline)
    missing = [n for n in names if n not in refs]
    if missing:
        raise PipelineError(f"curate ablation: {missing[0]} has no results (failed or not run; `dvc queue status`); "
                            "queue it again (--queue) and run `dvc exp run --run-all`, then --collect")
    base_params = _without_grid_keys(params_at(baseline))
    for n in names:
        other = first_difference(_without_grid_keys(params_at(refs[n])), base_params)
        if other:
            raise PipelineError(f"curate ablation: {n} differs from {baseline[:12]} in {other}, not only in curate."
                                f"{{{','.join(GRID_KEYS)}}}; remove it (dvc exp remove {n}) and run it again")
    rows = [row(n, params_at(refs[n]), metrics_at(refs[n]), base) for n in names]
    # the three fill modes at overfill 1.0 first (rows 0-2: what docs/ cites), then the docs rule's depths
    rows.sort(key=lambda r: (r["overfill"] != 1.0, MODES.index(r["mode"]) if r["mode"] in MODES else len(MODES),
                             r["overfill"] or 0))
    return {"source": f"experiments curate-* found by name, params checked against {baseline[:12]} (git trees)",
            "target": "pretrain@curated",
            "read_on": "tune set (ingest.tune_fraction of the held-out documents)", "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queue", action="store_true", help="run the `dvc exp run --queue` commands")
    ap.add_argument("--profile", choices=("default", "micro"), default="default")
    ap.add_argument("--overfills", nargs="+", type=float, default=list(OVERFILLS))
    ap.add_argument("--baseline", default="HEAD", help="the commit the experiments were queued from")
    ap.add_argument("--collect", action="store_true", help="read the experiments back into --out")
    ap.add_argument("--out", default="metrics/curate_ablation.json")
    args = ap.parse_args(argv)
    try:
        baseline = subprocess.run(["git", "rev-parse", args.baseline], capture_output=True, text=True,
                                  check=True).stdout.strip()
        experiments = grid(winner_mix(metrics_at(baseline).get(CURATE) or {}), args.overfills)
        if args.collect:
            table = collect(baseline, list(experiments))
            write_text_atomic(Path(args.out), json.dumps(table, indent=2, sort_keys=True) + "\n")
            print(f"{args.out}: {len(table['rows'])} experiments")
            return 0
        for name, sets in experiments.items():
            cmd = command(name, sets, MICRO if args.profile == "micro" else ())
            print(shlex.join(cmd))
            if args.queue:
                subprocess.run(cmd, check=True)
    except (PipelineError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

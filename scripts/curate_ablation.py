"""The curation research's ablations as DVC experiments: overfill x mode (issue 23, item 6).

    python scripts/curate_ablation.py                      # print the commands (dry run)
    python scripts/curate_ablation.py --queue --modes docs # queue them: dvc exp run --queue -S ... pretrain@curated
    dvc exp run --run-all --jobs 1                         # run the queue (each: curate + pretrain@curated, all seeds)
    python scripts/curate_ablation.py --collect            # dvc exp show --json -> metrics/curate_ablation.json

Each experiment reruns only what the change reaches on the way to `pretrain@curated` (the
curate stages track the whole `curate` section, the random arms' selections do not change, and
their pretraining is not a target), so one grid point costs one curated pretraining over
`pretrain.seeds`.

`--profile micro` adds `-S` overrides for a micro-sized variant (the micro profile's budget) that a
CI job can afford. Only the grid and the commands live here; the runs are DVC's.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from itertools import product
from pathlib import Path
from typing import Any

from decision_pipeline.reporting.experiments import baselines, exp_show, experiments, file_data

OVERFILLS = (1.0, 1.6, 2.2, 3.2, 4.5)   # the research's depths
MODES = ("docs", "tokens", "pooled")
MICRO = ("curate.budget_tokens=15000", "curate.reserve=0.1")


def commands(overfills=OVERFILLS, modes=MODES, extra: tuple[str, ...] = ()) -> list[list[str]]:
    """One `dvc exp run --queue` per (mode, overfill), named so the results table can be read back."""
    out = []
    for mode, of in product(modes, overfills):
        sets = [f"curate.mode={mode}", f"curate.overfill={of}", *extra]
        out.append(["dvc", "exp", "run", "--queue", "--name", f"curate-{mode}-of{of:g}".replace(".", "p"),
                    *[a for s in sets for a in ("-S", s)], "pretrain@curated"])
    return out


PPL = "metrics/pretrain/curated.json"
CURATE = "metrics/curate/curated.json"


def collect(show: Any, prefix: str = "curate-") -> dict:
    """The results table: one row per grid experiment (mode, overfill, held-out ppl over seeds, fallback)."""
    rows = []
    for exp in experiments(show):
        if not exp["name"].startswith(prefix):
            continue
        curate = file_data(exp["data"], "params", "params.yaml").get("curate", {})
        seeds = file_data(exp["data"], "metrics", PPL).get("seeds") or {}
        cur = file_data(exp["data"], "metrics", CURATE)
        if "ppl_mean" not in seeds:
            continue                               # queued, failed or still running: no result to table
        rows.append({"experiment": exp["name"], "mode": curate.get("mode"), "overfill": curate.get("overfill"),
                     "seeds": seeds.get("n"), "ppl_mean": seeds["ppl_mean"], "ppl_min": seeds.get("ppl_min"),
                     "ppl_max": seeds.get("ppl_max"),
                     "ppl_equal_registers_mean": seeds.get("ppl_equal_registers_mean"),
                     "bpb_mean": seeds.get("bpb_mean"), "selected_docs": cur.get("selected_docs"),
                     "fallback_docs": cur.get("fallback_docs"), "selected_tokens": cur.get("selected_tokens")})
    rows.sort(key=lambda r: (MODES.index(r["mode"]) if r["mode"] in MODES else len(MODES), r["overfill"] or 0))
    return {"source": "dvc exp show --json (experiments named curate-<mode>-of<overfill>)",
            "target": "pretrain@curated", "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queue", action="store_true", help="run the `dvc exp run --queue` commands")
    ap.add_argument("--profile", choices=("default", "micro"), default="default")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument("--overfills", nargs="+", type=float, default=list(OVERFILLS))
    ap.add_argument("--collect", action="store_true",
                    help="read `dvc exp show --json` and write the results table to --out")
    ap.add_argument("--out", default="metrics/curate_ablation.json")
    args = ap.parse_args(argv)
    if args.collect:
        table = collect([exp_show(rev) for rev in baselines()])
        Path(args.out).write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
        print(f"{args.out}: {len(table['rows'])} experiments")
        return 0
    cmds = commands(args.overfills, args.modes, extra=MICRO if args.profile == "micro" else ())
    for c in cmds:
        print(shlex.join(c))
        if args.queue:
            subprocess.run(c, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The curation research's ablations as DVC experiments: overfill x mode (issue 23, item 6).

    python scripts/curate_ablation.py            # print the commands (dry run)
    python scripts/curate_ablation.py --queue    # queue them: dvc exp run --queue -S ...
    dvc exp run --run-all --jobs 1               # then run the queue (costly: curate + 3 pretrain arms each)
    dvc exp show --json > data/curate_ablation_raw.json

`--profile micro` adds `-S` overrides for a micro-sized variant (the micro profile's budget) that a
CI job can afford. Only the grid and the commands live here; the runs are DVC's.
"""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from itertools import product

OVERFILLS = (1.0, 1.6, 2.2, 3.2, 4.5)   # the research's depths
MODES = ("docs", "tokens", "pooled")
MICRO = ("curate.budget_tokens=15000", "curate.reserve=0.1")


def commands(overfills=OVERFILLS, modes=MODES, extra: tuple[str, ...] = ()) -> list[list[str]]:
    """One `dvc exp run --queue` per (mode, overfill), named so the results table can be read back."""
    out = []
    for mode, of in product(modes, overfills):
        sets = [f"curate.mode={mode}", f"curate.overfill={of}", *extra]
        out.append(["dvc", "exp", "run", "--queue", "--name", f"curate-{mode}-of{of:g}".replace(".", "p"),
                    *[a for s in sets for a in ("-S", s)], "pretrain"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queue", action="store_true", help="run the `dvc exp run --queue` commands")
    ap.add_argument("--profile", choices=("default", "micro"), default="default")
    args = ap.parse_args(argv)
    cmds = commands(extra=MICRO if args.profile == "micro" else ())
    for c in cmds:
        print(shlex.join(c))
        if args.queue:
            subprocess.run(c, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

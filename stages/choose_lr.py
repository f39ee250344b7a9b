"""Stage `choose_lr`: apply the sweep's rule — lowest dev NLL, ties to the lower rate."""
from __future__ import annotations

import argparse
import time

from decision_pipeline.common.io import read_json, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_section
from decision_pipeline.decision.sft_trainer import lr_rule
from stages.lr_sweep import LrSweepParams


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--sweep-dir", default="metrics/lr_sweep")
    ap.add_argument("--out", default="metrics/choose_lr.json")
    args = ap.parse_args(argv)
    started = time.time()
    sweep = load_section(LrSweepParams, "lr_sweep", args.params)
    results = {lr: read_json(f"{args.sweep_dir}/{lr:g}.json")["dev"]["nll"] for lr in sweep.lrs}
    chosen = lr_rule(results)
    write_json(args.out, {"chosen_lr": chosen, "rule": "lowest dev NLL, ties to the lower rate",
                          "dev_nll": {f"{lr:g}": v for lr, v in sorted(results.items())}})
    summary("choose_lr", started, chosen_lr=chosen, **{f"nll@{lr:g}": v for lr, v in sorted(results.items())})


if __name__ == "__main__":
    raise SystemExit(main())

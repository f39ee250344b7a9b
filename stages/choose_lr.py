"""Stage `choose_lr`: apply the sweep's rule — lowest dev NLL, ties to the lower rate."""
from __future__ import annotations

import time

from decision_pipeline.common.io import write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_section, stage_parser
from decision_pipeline.decision.sft.config import LrSweepParams, choose_lr


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (LrSweepParams, "lr_sweep"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--sweep-dir", required=True, help="directory of lr_sweep's <lr>.json files")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    sweep = load_section(LrSweepParams, "lr_sweep", args.params)
    result = choose_lr(sweep.lrs, args.sweep_dir)
    write_json(args.out, result)
    summary("choose_lr", started, chosen_lr=result["chosen_lr"], **{f"nll@{k}": v for k, v in result["dev_nll"].items()})


if __name__ == "__main__":
    raise SystemExit(main())

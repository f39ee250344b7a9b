"""Stage `items`: the decision-question pool and its pool/dev/eval/calibration splits."""
from __future__ import annotations

import time

from decision_pipeline.common.io import write_json, write_table
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.questions.splits import ItemsParams, build_items
from decision_pipeline.questions.schema import QUESTION_SCHEMA


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (ItemsParams, "items"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", required=True, help="question table (Parquet)")
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    params = load_section(ItemsParams, "items", args.params)
    rows, metrics = build_items(params, load_base(args.params).seed + params.seed_offset)
    write_table(args.out, rows, QUESTION_SCHEMA)
    write_json(args.metrics, metrics)
    summary("items", started, n_items=metrics["n_items"], **metrics["splits"],
            cross_split_duplicates=metrics["cross_split_duplicates"])


if __name__ == "__main__":
    raise SystemExit(main())

"""Stage `select_chains`: parse, filter and keep one (or more) correct chain per question.

Drops loops (true degenerate repetition or cap hits — not merely repeated
lines), invented look-ups (configurable patterns), strips quirk strings inside
the thinking block, then keeps the shortest correct chain per question
(or a random correct one, or all correct ones).
"""
from __future__ import annotations

import time

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_json, write_jsonl
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.decision.sft.config import SelectChainsParams
from decision_pipeline.decision.sft.chains import read_chain_log, select_chains
from decision_pipeline.questions.schema import load_items


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (SelectChainsParams, "select_chains"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--chains", required=True, help="generate's chains.jsonl")
    ap.add_argument("--items", required=True)
    ap.add_argument("--out", required=True, help="kept chains (JSONL)")
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(SelectChainsParams, "select_chains", args.params)
    seed = load_base(args.params).seed
    records = read_chain_log(args.chains)
    by_id = {q["id"]: q for q in load_items(args.items, split="pool")}
    try:
        kept, metrics = select_chains(records, by_id, p, seed)
    except PipelineError as exc:
        raise PipelineError(f"{args.chains}: {exc}") from None
    write_jsonl(args.out, kept)
    write_json(args.metrics, metrics)
    summary("select_chains", started, generated=metrics["generated"], parsed=metrics["parsed"], kept=metrics["kept"],
            loops=metrics["loops_dropped"], lookups=metrics["lookups_dropped"])


if __name__ == "__main__":
    raise SystemExit(main())

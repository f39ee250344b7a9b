"""Stage `s1mb_data`: the S1MB benchmark set the `s1mb@{model}` stages score against.

source: synthetic (default/micro profiles) builds it offline: with
bench_source: transfer (default) from bench-only generators whose templates no
training or pretraining text uses (a transfer test), with bench_source: items
from the `bench` split of the items (questions no training, calibration or
evaluation step reads); source: local (GPU profile) validates and indexes a
local export of the real data. Both write ``<out>/index.json``. The work is
`decision_pipeline.bench.data` (its docstring has the layouts).
"""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.bench.data import ITEMS_SPLIT, S1mbDataParams, bench_metrics, build_bench
from decision_pipeline.bench.transfer import transfer_questions
from decision_pipeline.common.io import write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.questions.schema import load_split


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (S1mbDataParams, "s1mb_data"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--items", required=True, help=f"its {ITEMS_SPLIT!r} split feeds the synthetic set "
                    "(bench_source: items)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(S1mbDataParams, "s1mb_data", args.params)
    seed = load_base(args.params).seed
    questions: list[dict] = []
    if p.source == "synthetic":
        questions = (load_split(args.items, ITEMS_SPLIT) if p.bench_source == "items"
                     else transfer_questions(p.transfer_per_level, seed))
    index = build_bench(Path(args.out), questions, p, seed)
    write_json(args.metrics, bench_metrics(index))
    summary("s1mb_data", started, source=p.source, bench_source=p.bench_source, category=p.category,
            benchmarks=index["n_benchmarks"], judgments=index["n_judgments"])


if __name__ == "__main__":
    raise SystemExit(main())

"""Stage `s1mb@{model}`: S1MB results, task scores, Task Avg and Borda for one model.

Reads the benchmark set indexed by `s1mb_data`, answers every benchmark of its
category with the pipeline's readout (``decision_pipeline.bench.adapter``:
per-task temperatures, chunked readout above 8 options, optional routed
thinking; the run is ``decision_pipeline.bench.scoring.score_model``), and writes

- ``--out``: a published-style model folder ``pipeline__<model>/``
  (``metadata.json`` + one upstream result ``<benchmark-id>.json.xz`` each,
  every one re-verified by recomputing its metrics); copy it into a cohort
  directory to rank later models against it;
- ``--metrics``: ``task_avg``, ``task_scores.{noul,choice,score}``
  (0-1, null where the spec says null), ``n_benchmarks``, ``n_judgments``, and
  with ``s1mb.cohort_dir`` (a directory of published model folders) ``borda``
  and competition ``rank`` among the cohort plus this model.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from decision_pipeline.bench.adapter import S1mbParams
from decision_pipeline.bench.s1mb import write_model_folder
from decision_pipeline.bench.scoring import score_model
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import atomic_dir, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (S1mbParams, "s1mb"))
    ap.add_argument("model", help="model name (used in the result folder's id)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", required=True, help="the s1mb_data output")
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--out", required=True, help="directory for the model folder")
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(S1mbParams, "s1mb", args.params)
    if Path(args.out).resolve() == Path(args.data).resolve():
        raise PipelineError(f"s1mb@{args.model}: --out {args.out} would overwrite the benchmark set; choose another")
    torch.set_num_threads(p.threads)
    score = score_model(args.model, args.model_dir, args.data, p, load_base(args.params).seed)
    with atomic_dir(args.out) as tmp:
        write_model_folder(tmp, score.metadata, score.results)
    write_json(args.metrics, score.metrics)
    m = score.metrics
    summary(f"s1mb@{args.model}", started, benchmarks=m["n_benchmarks"], judgments=m["n_judgments"],
            task_avg=m["task_avg"] if m["task_avg"] is not None else "null",
            **({"borda": m["borda"], "rank": m["rank"]} if p.cohort_dir else {}))


if __name__ == "__main__":
    raise SystemExit(main())

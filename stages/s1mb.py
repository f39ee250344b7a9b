"""Stage `s1mb@{model}`: S1MB results, task scores, Task Avg and Borda for one model.

Reads the benchmark set indexed by `s1mb_data` and the model's calibrated
per-task readout temperatures (``--temps``: ``calibrate@<model>``'s
``temperatures.json``; a task not there reads as T = 1), answers every
benchmark of its category with the pipeline's readout
(``decision_pipeline.bench.adapter``: calibrated temperatures, chunked readout
above 8 options) and, from the same readout, with the lowest-margin
``s1mb.route_fraction`` of questions re-answered by thinking (the run is
``decision_pipeline.bench.scoring.score_model``), and writes

- ``--out``: two published-style model folders, ``pipeline__<model>/``
  (readout only) and ``pipeline__<model>-routed/`` (``metadata.json`` + one
  upstream result ``<benchmark-id>.json.xz`` each, every one re-verified by
  recomputing its metrics); copy one into a cohort directory to rank later
  models against it;
- ``--metrics``: ``task_avg``, ``task_scores.{noul,choice,score}`` (readout
  only) and ``task_avg_routed``, ``task_scores_routed`` (0-1, null where the
  spec says null), ``temperatures``, ``route_fraction``, ``n_benchmarks``,
  ``n_judgments``, ``routed_questions``, ``routed_parsed``, item-bootstrap
  ``cis``/``cis_routed``, and ``borda`` and competition ``rank``
  (``borda_routed``, ``rank_routed``) of each variant added alone to the
  cohort: the reference scorers (``decision_pipeline.bench.cohort``) always,
  plus the published model folders of ``s1mb.cohort_dir`` when set;
- ``--timings`` (optional): the run-local record (wall time, Python version, platform), outside DVC's
  hashes: the result files carry nothing machine-specific, so a run on another kernel writes the same bytes.
"""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.bench.params import S1mbParams
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import atomic_dir, write_json, write_timings
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (S1mbParams, "s1mb"))
    ap.add_argument("model", help="model name (used in the result folder's id)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", required=True, help="the s1mb_data output")
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--temps", required=True, help="calibrate's temperatures.json for this model")
    ap.add_argument("--out", required=True, help="directory for the two model folders (readout, routed)")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--timings", help="run-local record: wall time, Python version, platform (not a DVC output)")
    args = ap.parse_args(argv)
    # the model libraries only after the arguments parsed: `--help` and a wrong flag answer in under a
    # second instead of paying ~6 s of torch, transformers and peft imports
    import torch
    from decision_pipeline.bench.adapter import load_readout_temperatures
    from decision_pipeline.bench.s1mb import machine_environment, write_model_folder
    from decision_pipeline.bench.scoring import score_model
    started = time.time()
    p = load_section(S1mbParams, "s1mb", args.params)
    if Path(args.out).resolve() == Path(args.data).resolve():
        raise PipelineError(f"s1mb@{args.model}: --out {args.out} would overwrite the benchmark set; choose another")
    temps = load_readout_temperatures(args.temps)  # before the model loads: a bad file fails fast
    post_temps = load_readout_temperatures(args.temps, "post_chain", required=False)  # routed questions read out after the chain
    torch.set_num_threads(p.threads)
    score = score_model(args.model, args.model_dir, args.data, p, temps, load_base(args.params).seed, post_temps)
    with atomic_dir(args.out) as tmp:
        for folder in (score.readout, score.routed):
            write_model_folder(tmp, folder.metadata, folder.results)
    write_json(args.metrics, score.metrics)
    if args.timings:
        write_timings(args.timings, started, machine_environment())
    m = score.metrics
    summary(f"s1mb@{args.model}", started, benchmarks=m["n_benchmarks"], judgments=m["n_judgments"],
            task_avg=_num(m["task_avg"]), task_avg_routed=_num(m["task_avg_routed"]), routed=m["routed_questions"],
            borda=_num(m["borda"]), rank=_num(m["rank"]))


def _num(value: float | None) -> float | str:
    """A metric for the summary line ('null' where the spec gives none)."""
    return value if value is not None else "null"


if __name__ == "__main__":
    raise SystemExit(main())

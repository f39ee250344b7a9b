"""Stage `generate`: k reasoning chains per pool question from the base model, plus a teacher.

Teacher: `solver` (the families' own traces: a rule-based stand-in for an LLM
teacher, default profile), `openai` (an OpenAI-compatible endpoint, GPU
profile) or `none`. `generate.workers` processes (or GPUs) share the base
model's chunks, each appending to its own shard log under `--out/shards/` in a
`persist: true` directory: a killed run resumes from them; a change of params or
base model starts afresh. `chains.jsonl` is written once, whole and in canonical
order, when every chain is in: the same bytes for any number of workers. With
`deadline_minutes` the stage stops cleanly at a chunk boundary and exits 3 so DVC
does not record a partial result; `dvc repro` resumes.
"""
from __future__ import annotations

import sys
import time

from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.common.io import write_json, write_timings
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.decision.generate.generation import GenerateParams
from decision_pipeline.questions.schema import load_split
from decision_pipeline.lm.params import RuntimeParams


@stage_main(ray_exit=True)  # engine ray: the process ends once the outputs are written
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (GenerateParams, "generate"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--model", required=True, help="base model directory")
    ap.add_argument("--items", required=True, help="items table (pool split is used)")
    ap.add_argument("--out", required=True, help="persistent directory for chains.jsonl")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--timings", required=True, help="machine-dependent throughput (a cached output, not a metric)")
    args = ap.parse_args(argv)
    # the model libraries only after the arguments parsed: `--help` and a wrong flag answer in under a
    # second instead of paying ~6 s of torch, transformers and peft imports
    import torch
    from decision_pipeline.decision.generate.run import generate_to_log
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.model import load_model
    started = time.time()
    p = load_section(GenerateParams, "generate", args.params)
    seed = load_base(args.params).seed
    torch.set_num_threads(p.threads)
    device = load_section(RuntimeParams, "runtime", args.params).device
    model, tok = load_model(args.model, device=device), load_tokenizer(args.model)
    questions = sorted(stable_subset(load_split(args.items, "pool"), p.max_questions, "generate"),
                       key=lambda q: q["id"])
    metrics = generate_to_log(p, seed, model, tok, args.model, questions, args.out, started)
    if metrics.pop("stopped_early"):
        print(f"error: generate: {metrics['why']}; {metrics['records']} records kept in {args.out}; "
              "rerun `dvc repro` to resume", file=sys.stderr)
        raise SystemExit(3)
    # how much of the log an earlier run wrote is run history, not a result: a fresh clone's run and
    # a resumed one must give the same metrics, so it goes to the timings file with the throughput
    run = {**metrics.pop("throughput"), "resumed_records": metrics.pop("resumed_records")}
    write_json(args.metrics, metrics)
    write_timings(args.timings, started, run)
    summary("generate", started, questions=len(questions), records=metrics["records"],
            resumed=run["resumed_records"], tok_per_s=run["tokens_per_second"],
            truncated=metrics["base"]["truncated"])


if __name__ == "__main__":
    raise SystemExit(main())

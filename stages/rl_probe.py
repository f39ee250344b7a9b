"""Stage `rl_probe`: k chains per candidate question from the SFT model; correct-of-k and the raw readout.

Candidates: `rl_probe.fresh_questions` from the `rl` split (never trained on)
and `rl_probe.sft_questions` from the SFT pool, each a SHA-256 subset. Chains
are sampled with RL's own settings (`rl.temperature`, `rl.top_p`,
`rl.max_completion_length`) into resumable shard logs (`persist: true`) over
`rl_probe.workers` processes (or Ray actors: `rl_probe.engine: ray`), merged into one `chains.jsonl` at the end; the
readout logits are one forward pass per question. Writes `probe.jsonl` (one row
per question) beside the log.
"""
from __future__ import annotations

import time

from decision_pipeline.common.io import read_jsonl, write_json, write_jsonl, write_timings
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.decision.rl.config import RLParams, RlProbeParams
from decision_pipeline.questions.schema import load_items
from decision_pipeline.lm.params import RuntimeParams


@stage_main(ray_exit=True)  # engine ray: the process ends once the outputs are written
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (RlProbeParams, "rl_probe"), (RuntimeParams, "runtime"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--model", required=True, help="the SFT model directory")
    ap.add_argument("--items", required=True)
    ap.add_argument("--out", required=True, help="persistent directory for chains.jsonl and probe.jsonl")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--timings", required=True, help="machine-dependent throughput (a cached output, not a metric)")
    args = ap.parse_args(argv)
    # the model libraries only after the arguments parsed: `--help` and a wrong flag answer in under a
    # second instead of paying ~6 s of torch, transformers and peft imports
    import torch
    from decision_pipeline.decision.evaluate.answering import readout
    from decision_pipeline.decision.rl.probe import (ProbeSampling, candidates, probe_log, probe_metrics, probe_rows,
                                                     probe_workers)
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.model import load_model
    started = time.time()
    p = load_section(RlProbeParams, "rl_probe", args.params)
    rl = load_section(RLParams, "rl", args.params)
    seed = load_base(args.params).seed
    torch.set_num_threads(p.threads)
    questions = candidates(load_items(args.items, split="pool"), load_items(args.items, split="rl"), p)
    runtime = load_section(RuntimeParams, "runtime", args.params)
    probe_workers(p, args.model, runtime)  # engine ray: the cluster checked before any work
    model, tok = load_model(args.model, device=runtime.device), load_tokenizer(args.model)
    # the readout first: a vLLM engine keeps its share of the GPU once built
    logits = readout(model, tok, questions, p.batch_size, runtime.readout_batch_tokens)
    sampling = ProbeSampling(temperature=rl.temperature, top_p=rl.top_p, max_new_tokens=rl.max_completion_length)
    generation = probe_log(p, sampling, seed, model, tok, args.model, questions, args.out, runtime)
    rows = probe_rows(questions, read_jsonl(f"{args.out}/chains.jsonl"), logits, tok, p.k)
    write_jsonl(f"{args.out}/probe.jsonl", rows)
    # run history (what an earlier run had logged) goes with the throughput, not into the metrics
    write_timings(args.timings, started, {key: generation.pop(key)
                                          for key in ("tokens_per_second", "resumed_records", "new_records")})
    metrics = probe_metrics(rows, p.k, generation)
    write_json(args.metrics, metrics)
    summary("rl_probe", started, questions=len(rows), fresh=metrics["fresh"]["questions"],
            mixed_share=metrics["mixed_share"])


if __name__ == "__main__":
    raise SystemExit(main())

"""Stage `pretrain@{curated,filtered_random,random}`: the small GPT on a selection, held-out ppl over seeds.

Packs the selection to exactly `curate.budget_tokens`, trains the tiny Qwen2
model, evaluates loss / perplexity / bits per byte on every register of the
held-out evaluation set (never the dev target the classifier learned from) by
iterating all of it. Every selection is trained `pretrain.seeds` times (init
seed and document order vary); the seed-0 model is saved. Each seed checkpoints
into `--work` (not a DVC output: a rerun with the same fingerprint resumes) every `pretrain.save_steps`: a killed stage resumes
there and ends with the same weights; a change of params, data or code starts afresh.
`pretrain.launch` picks the process count and accelerate config: more than one process
re-runs this command under `accelerate launch` (DDP, an equal share of every batch per
process), and rank 0 alone writes the outputs.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

from decision_pipeline.common.fingerprint import code_fingerprint, run_fingerprint
from decision_pipeline.common.workdir import claim, content_params
from decision_pipeline.common.io import atomic_dir, read_json, read_table, write_json, write_timings
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, read_params_file, stage_parser
from decision_pipeline.lm.params import LaunchParams, PretrainParams


def model_fingerprint_of_tokenizer(tokenizer_dir: str) -> str:
    """SHA-256 over the tokenizer directory's files: other ids mean other training data."""
    h = hashlib.sha256()
    for path in sorted(Path(tokenizer_dir).glob("*")):
        if path.is_file():
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (PretrainParams, "pretrain"), (LaunchParams, "pretrain.launch"))
    ap.add_argument("name", help="selection name (curated, filtered_random or random)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--selection", required=True, help="the curate output directory (selection.json)")
    ap.add_argument("--pool", required=True)
    ap.add_argument("--heldout", required=True, help="held-out evaluation documents (ingest's heldout.parquet)")
    ap.add_argument("--tune", help="knob-tuning documents (ingest's tune.parquet): evaluated into tune_seeds")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True, help="model directory")
    ap.add_argument("--work", required=True, help="persistent checkpoint directory (resume)")
    ap.add_argument("--plot", required=True, help="loss curve JSON")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--timings", required=True, help="machine-dependent throughput (a cached output, not a metric)")
    ap.add_argument("--live", help="DVCLive directory for the per-step training metrics (its own directory: a rerun empties it)")
    args = ap.parse_args(argv)
    # the model libraries only after the arguments parsed: `--help` and a wrong flag answer in under a
    # second instead of paying ~6 s of torch and transformers imports
    import torch
    from decision_pipeline.lm import model as model_module
    from decision_pipeline.lm import training
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.launch import finish, is_main, on_main_then_all, threads_per_process, train_here
    from decision_pipeline.lm.training import pretrain, selected_texts
    started = time.time()
    p = load_section(PretrainParams, "pretrain", args.params)
    seed = load_base(args.params).seed
    budget = int(read_params_file(args.params)["curate"]["budget_tokens"])
    if not train_here(p.launch, "pretrain", "stages.pretrain", argv, args.params, p.bf16):
        return  # the launched processes trained; rank 0 wrote the outputs and the summary line
    torch.set_num_threads(threads_per_process(p.threads))
    tok = load_tokenizer(args.tokenizer)
    texts = {r["id"]: r["text"] for r in read_table(args.pool)}
    selection = f"{args.selection}/selection.json"
    sel = read_json(selection)
    chosen = selected_texts(texts, sel["ids"], selection)
    heldout = read_table(args.heldout)
    # a checkpoint holds the whole state and no rank draws random numbers, so any process count resumes it
    fingerprint = run_fingerprint(content_params(p), budget, seed, chosen, [r["text"] for r in heldout],
                                  model_fingerprint_of_tokenizer(args.tokenizer), code_fingerprint(training, model_module))
    on_main_then_all(lambda: claim(args.work, fingerprint, "pretrain"))
    model, log, metrics = pretrain(args.name, chosen, heldout, tok, p, budget, seed, work_dir=args.work,
                                   n_budget_docs=sel.get("n_budget_docs"),  # seeds reorder, never swap in the tail
                                   live_dir=args.live, tune_rows=read_table(args.tune) if args.tune else ())
    finish()
    if not is_main():
        return  # only rank 0 writes
    with atomic_dir(args.out) as tmp:
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
    write_json(args.plot, [{"step": r["step"], "loss": r["loss"]} for r in log])
    write_timings(args.timings, started, {"tokens_per_second": metrics["train"].pop("tokens_per_second")})
    write_json(args.metrics, metrics)
    summary(f"pretrain@{args.name}", started, heldout_ppl=metrics["heldout"]["ppl"], bpb=metrics["heldout"]["bpb"],
            ppl_mean=metrics["seeds"]["ppl_mean"], ppl_range=f"{metrics['seeds']['ppl_min']}-{metrics['seeds']['ppl_max']}")


if __name__ == "__main__":
    raise SystemExit(main())

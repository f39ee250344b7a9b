"""Stage `sft`: joint LoRA SFT of the decision model (chains + soft-target readout) with TRL.

Reads the kept chains and all generated chains (their parsed answers are the
readout target's votes), trains one LoRA adapter with `JointSFTTrainer`
(resuming a matching run from its checkpoints), saves the adapter and a merged
model, and reports dev readout accuracy / NLL / ECE, training tokens and
throughput. The learning rate comes from the sweep (`lr_source: sweep`, the
choose_lr stage's pick) or from `sft.lr`. `sft.launch` picks the process count and
accelerate config: one process trains here; more re-run this command under
`accelerate launch`, and rank 0 alone writes the outputs.
"""
from __future__ import annotations

import time

from decision_pipeline.common.io import atomic_dir, read_json, write_json, write_timings
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.decision.sft.config import SFTParams
from decision_pipeline.lm.params import LaunchParams, RuntimeParams


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (SFTParams, "sft"), (LaunchParams, "sft.launch"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--base", required=True, help="base model directory")
    ap.add_argument("--items", required=True)
    ap.add_argument("--kept", required=True, help="select_chains' kept chains")
    ap.add_argument("--chains", required=True, help="all generated chains (readout votes)")
    ap.add_argument("--chosen", required=True, help="choose_lr's output (used when lr_source is sweep)")
    ap.add_argument("--work", required=True, help="persistent checkpoint directory")
    ap.add_argument("--out", required=True, help="merged model directory (adapter in <out>/adapter)")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--plots", required=True, help="directory for loss_parts.json and loss.png")
    ap.add_argument("--timings", required=True, help="machine-dependent throughput (a cached output, not a metric)")
    ap.add_argument("--live", help="DVCLive directory for the per-step training metrics (its own directory: a rerun empties it)")
    args = ap.parse_args(argv)
    # the model libraries only after the arguments parsed: `--help` and a wrong flag answer in under a
    # second instead of paying ~6 s of torch, transformers and peft imports
    import torch
    from decision_pipeline.lm.adapters import save_adapter_and_merged
    from decision_pipeline.decision.sft.run import run_sft
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.launch import finish, threads_per_process, train_here
    from decision_pipeline.lm.model import load_model
    from decision_pipeline.reporting.stage_figures import plot_loss_curves
    started = time.time()
    p = load_section(SFTParams, "sft", args.params)
    seed = load_base(args.params).seed + p.seed_offset  # a seed study varies only the SFT run
    lr = float(read_json(args.chosen)["chosen_lr"]) if p.lr_source == "sweep" else p.lr
    if not train_here(p.launch, "sft", "stages.sft", argv, args.params, p.bf16):
        return  # the launched processes trained; rank 0 wrote the outputs and the summary line
    torch.set_num_threads(threads_per_process(p.threads))
    device = load_section(RuntimeParams, "runtime", args.params).device
    model, tok = load_model(args.base, device=device), load_tokenizer(args.base)
    result = run_sft(p, lr, seed, model, tok, args.base, args.items, args.kept, args.chains, args.work,
                     live_dir=args.live)
    finish()
    if result is None:
        return  # not rank 0: only rank 0 writes
    peft_model, merged, metrics, parts = result
    with atomic_dir(args.out) as tmp:
        save_adapter_and_merged(peft_model, merged, tok, tmp)
    write_json(f"{args.plots}/loss_parts.json", parts)
    plot_loss_curves({"chain (LM) loss": [{"step": r["step"], "loss": r["chain_loss"]} for r in parts],
                      "readout (soft-target) loss": [{"step": r["step"], "loss": r["readout_loss"]} for r in parts]},
                     f"{args.plots}/loss.png", f"joint SFT, lr={lr:g}")
    tokens_per_second = metrics.pop("tokens_per_second")
    write_json(args.metrics, metrics)
    write_timings(args.timings, started, {"tokens_per_second": tokens_per_second})
    summary("sft", started, lr=lr, dev_acc=metrics["dev"]["accuracy"], dev_nll=metrics["dev"]["nll"],
            tok_per_s=tokens_per_second)


if __name__ == "__main__":
    raise SystemExit(main())

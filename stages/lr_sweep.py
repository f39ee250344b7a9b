"""Stage `lr_sweep@{lr}`: a short joint SFT at one learning rate on a subset; dev NLL decides.

Same data and loss as `sft`, `lr_sweep.max_steps` steps on `lr_sweep.max_examples`
examples; the choose_lr stage compares the dev readout NLL across rates. It
tracks only the `sft` keys it reads, so an SFT seed study does not rerun it. It
launches like `sft` (`sft.launch`); rank 0 alone writes the metrics.
"""
from __future__ import annotations

import time

from decision_pipeline.common.io import write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.decision.sft.config import LrSweepParams, SFTParams
from decision_pipeline.lm.params import LaunchParams, RuntimeParams


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (LrSweepParams, "lr_sweep"), (SFTParams, "sft"), (LaunchParams, "sft.launch"))
    ap.add_argument("lr", type=float)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--base", required=True)
    ap.add_argument("--items", required=True)
    ap.add_argument("--kept", required=True)
    ap.add_argument("--chains", required=True)
    ap.add_argument("--metrics", required=True, help="this rate's metrics file")
    args = ap.parse_args(argv)
    # the model libraries only after the arguments parsed: `--help` and a wrong flag answer in under a
    # second instead of paying ~6 s of torch, transformers and peft imports
    import torch
    from decision_pipeline.decision.sft.run import sweep_point
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.launch import finish, threads_per_process, train_here
    from decision_pipeline.lm.model import load_model
    started = time.time()
    sweep = load_section(LrSweepParams, "lr_sweep", args.params)
    p = load_section(SFTParams, "sft", args.params)
    seed = load_base(args.params).seed
    if not train_here(p.launch, "sft", "stages.lr_sweep", argv, args.params, p.bf16):
        return  # the launched processes trained; rank 0 wrote the metrics
    torch.set_num_threads(threads_per_process(p.threads))
    device = load_section(RuntimeParams, "runtime", args.params).device
    model, tok = load_model(args.base, device=device), load_tokenizer(args.base)
    metrics = sweep_point(sweep, p, args.lr, seed, model, tok, args.items, args.kept, args.chains)
    finish()
    if metrics is None:
        return  # not rank 0
    write_json(args.metrics, metrics)
    summary(f"lr_sweep@{args.lr:g}", started, dev_nll=metrics["dev"]["nll"], dev_acc=metrics["dev"]["accuracy"])


if __name__ == "__main__":
    raise SystemExit(main())

"""Stage `base_model`: the decision model's starting point.

Default profile: the small GPT pretrained on the curated selection
(`pretrain@curated`), so a change in curation re-runs the decision chain.
GPU profile: any local Hugging Face model directory (`source: path`).
Either way it reports the NLL of the solver's gold traces on held-out
questions, beside the same architecture untrained: pretraining must make the
base a better starting point.
"""
from __future__ import annotations

import time

from decision_pipeline.common.io import atomic_dir, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.decision.base.config import BaseModelParams
from decision_pipeline.questions.schema import load_split


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (BaseModelParams, "base_model"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pretrained", required=True, help="the pretrain@curated model (source: pretrain)")
    ap.add_argument("--items", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    # the model libraries (torch, transformers, peft) only after the arguments parsed: `--help` and a wrong
    # flag answer in under a second instead of paying ~5 s of imports
    import torch
    from decision_pipeline.decision.base.model import assess_base, base_source, prepare_base, write_base
    started = time.time()
    p = load_section(BaseModelParams, "base_model", args.params)
    torch.set_num_threads(p.threads)
    source = base_source(p, args.pretrained)
    prepared = prepare_base(source, p.add_think_tokens)  # the tokenizer checked before anything is written
    with atomic_dir(args.out) as tmp:
        write_base(source, tmp, prepared)
        metrics = assess_base(tmp, load_split(args.items, "eval"), p, load_base(args.params).seed)
    metrics.update(source=str(source), added_tokens=prepared.added)
    write_json(args.metrics, metrics)
    summary("base_model", started, gold_trace_nll=metrics["gold_trace_nll"],
            untrained=metrics["gold_trace_nll_untrained"])


if __name__ == "__main__":
    raise SystemExit(main())

"""Stage `pretrain@{curated,filtered_random,random}`: the small GPT on a selection, held-out ppl over seeds.

Packs the selection to exactly `curate.budget_tokens`, trains the tiny Qwen2
model, evaluates loss / perplexity / bits per byte on every register of the
held-out evaluation set (never the dev target the classifier learned from) by
iterating all of it. Every selection is trained `pretrain.seeds` times (init
seed and document order vary); the seed-0 model is saved.
"""
from __future__ import annotations

import time

import torch

from decision_pipeline.common.io import atomic_dir, read_json, read_table, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, read_params_file, stage_parser
from decision_pipeline.lm.bpe import load_tokenizer
from decision_pipeline.lm.training import PretrainParams, pretrain, selected_texts


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (PretrainParams, "pretrain"))
    ap.add_argument("name", help="selection name (curated, filtered_random or random)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--selection", required=True, help="the curate output directory (selection.json)")
    ap.add_argument("--pool", required=True)
    ap.add_argument("--heldout", required=True, help="held-out evaluation documents (ingest's heldout.parquet)")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True, help="model directory")
    ap.add_argument("--plot", required=True, help="loss curve JSON")
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(PretrainParams, "pretrain", args.params)
    seed = load_base(args.params).seed
    budget = int(read_params_file(args.params)["curate"]["budget_tokens"])
    torch.set_num_threads(p.threads)
    tok = load_tokenizer(args.tokenizer)
    texts = {r["id"]: r["text"] for r in read_table(args.pool)}
    selection = f"{args.selection}/selection.json"
    chosen = selected_texts(texts, read_json(selection)["ids"], selection)
    model, log, metrics = pretrain(args.name, chosen, read_table(args.heldout), tok, p, budget, seed)
    with atomic_dir(args.out) as tmp:
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
    write_json(args.plot, [{"step": r["step"], "loss": r["loss"]} for r in log])
    write_json(args.metrics, metrics)
    summary(f"pretrain@{args.name}", started, heldout_ppl=metrics["heldout"]["ppl"], bpb=metrics["heldout"]["bpb"],
            ppl_mean=metrics["seeds"]["ppl_mean"], ppl_range=f"{metrics['seeds']['ppl_min']}-{metrics['seeds']['ppl_max']}")


if __name__ == "__main__":
    raise SystemExit(main())

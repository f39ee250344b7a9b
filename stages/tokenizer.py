"""Stage `tokenizer`: train the byte-level BPE of the default profile on pipeline text.

Corpus: the document pool, decontaminated exactly as `curate` does it (a pool
document holding a held-out or RL-fresh question is dropped), plus the
training-split questions rendered as chats (so the chat markup and `Answer: X`
label tokens are learned). Held-out dev documents and questions are never seen.
"""
from __future__ import annotations

import time

from decision_pipeline.common.io import atomic_dir, read_table, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_section, stage_parser
from decision_pipeline.curation.decontaminate import decontaminate, held_out_questions
from decision_pipeline.questions.schema import load_items, load_split
from decision_pipeline.lm.params import TokenizerParams


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (TokenizerParams, "tokenizer"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pool", required=True)
    ap.add_argument("--items", required=True, help="pool split: training chats; the others: decontamination")
    ap.add_argument("--out", required=True)
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(TokenizerParams, "tokenizer", args.params)
    # transformers (and torch beneath it) only after the arguments parsed: `--help` answers in under a second
    from decision_pipeline.lm.bpe import train_pipeline_tokenizer
    clean = decontaminate(read_table(args.pool), held_out_questions(load_items(args.items)))
    fast, metrics = train_pipeline_tokenizer([d["text"] for d in clean.kept], load_split(args.items, "pool"), p)
    metrics["decontaminated_docs"] = len(clean.removed)
    with atomic_dir(args.out) as tmp:
        fast.save_pretrained(str(tmp))
    write_json(args.metrics, metrics)
    summary("tokenizer", started, **metrics)


if __name__ == "__main__":
    raise SystemExit(main())

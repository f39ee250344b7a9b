"""Stage `select_chains`: parse, filter and keep one (or more) correct chain per question.

Drops loops (true degenerate repetition or cap hits — not merely repeated
lines), invented look-ups (configurable patterns), strips quirk strings inside
the thinking block, then keeps the shortest correct chain per question
(or a random correct one, or all correct ones).
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import read_jsonl, write_json, write_jsonl
from decision_pipeline.common.log import progress, stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from decision_pipeline.decision.chains import (DEFAULT_LOOKUP_PATTERNS, drop_counts, ensure_nonempty, judge_chain,
                                    select_per_question, selection_metrics)
from decision_pipeline.decision.questions import load_items


@dataclass
class LoopParams:
    min_repeats: int = rule(min=2)
    window: int = rule(min=8)
    ngram: int = rule(min=1)
    min_distinct: float = rule(min=0.0, max=1.0)


@dataclass
class SelectChainsParams:
    strategy: str = rule(choices=("shortest", "random", "all"))
    loop: LoopParams
    lookup_patterns: list[str] = field(default_factory=list)  # empty = the built-in list
    quirks: list[str] = field(default_factory=list)


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--chains", default="data/generate/chains.jsonl")
    ap.add_argument("--items", default="data/items/items.parquet")
    ap.add_argument("--out", default="data/select_chains/kept.jsonl")
    ap.add_argument("--metrics", default="metrics/select_chains.json")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(SelectChainsParams, "select_chains", args.params)
    seed = load_base(args.params).seed
    records = read_jsonl(args.chains)
    by_id = {q["id"]: q for q in load_items(args.items, split="pool")}
    missing = sorted({r["question_id"] for r in records} - set(by_id))
    if missing:
        raise PipelineError(f"{args.chains}: chain for unknown question {missing[0]!r}; rerun generate")
    patterns = p.lookup_patterns or DEFAULT_LOOKUP_PATTERNS
    judged = [judge_chain(r, by_id[r["question_id"]], lookup_patterns=patterns, quirks=p.quirks,
                          loop_params=vars(p.loop)) for r in progress(records, desc="judge", unit="chain")]
    kept = select_per_question(judged, p.strategy, seed)
    ensure_nonempty(kept, drop_counts(judged))
    questions = [by_id[q] for q in sorted({r["question_id"] for r in records})]
    metrics = selection_metrics(questions, judged, kept)
    metrics["kept_by_source"] = {s: sum(c["source"] == s for c in kept) for s in sorted({c["source"] for c in judged})}
    metrics["base_correct_chains"] = sum(c["correct"] for c in judged if c["source"] == "base")
    write_jsonl(args.out, [{k: c[k] for k in ("id", "question_id", "source", "sample", "text", "n_tokens")} for c in kept])
    write_json(args.metrics, metrics)
    summary("select_chains", started, generated=metrics["generated"], parsed=metrics["parsed"], kept=metrics["kept"],
            loops=metrics["loops_dropped"], lookups=metrics["lookups_dropped"])


if __name__ == "__main__":
    raise SystemExit(main())

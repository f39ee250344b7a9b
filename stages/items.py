"""Stage `items`: the decision-question pool and its pool/dev/eval/calibration splits."""
from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass, field

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_json, write_table
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from decision_pipeline.decision.families import FAMILIES
from decision_pipeline.decision.item_splits import assign_splits, build_questions, duplicate_report
from decision_pipeline.decision.questions import QUESTION_SCHEMA, load_external_questions, to_row

SPLITS = ("pool", "dev", "eval", "calibration")


@dataclass
class ItemsParams:
    """`families` × `levels` × `per_cell` built-in questions, plus an optional external file."""
    families: list[str] = rule(choices=tuple(FAMILIES))
    levels: list[int] = rule(min=0, max=4)
    per_cell: int = rule(min=1)
    splits: dict[str, float] = field(default_factory=dict)
    external: str = ""  # JSONL/Parquet question file; its questions are split like the rest

    def __post_init__(self) -> None:
        if set(self.splits) != set(SPLITS) or abs(sum(self.splits.values()) - 1) > 1e-9:
            raise PipelineError(f"params.yaml: items.splits needs keys {', '.join(SPLITS)} with fractions summing to 1")


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", default="data/items/items.parquet")
    ap.add_argument("--metrics", default="metrics/items.json")
    args = ap.parse_args(argv)
    started = time.time()
    params = load_section(ItemsParams, "items", args.params)
    base_seed = load_base(args.params).seed

    questions = build_questions(params.families, params.levels, params.per_cell, base_seed)
    if params.external:
        questions += load_external_questions(params.external)
    ids = Counter(q["id"] for q in questions)
    dup_ids = [i for i, c in ids.items() if c > 1]
    if dup_ids:
        raise PipelineError(f"items: question id {dup_ids[0]!r} occurs more than once; ids must be unique")
    splits = assign_splits(questions, dict(params.splits))
    rows = sorted((to_row(q, splits[q["id"]]) for q in questions), key=lambda r: r["id"])
    dups = duplicate_report(questions, splits)
    per_split = Counter(splits.values())
    metrics = {"n_items": len(rows), "splits": {s: per_split.get(s, 0) for s in SPLITS},
               "families": dict(sorted(Counter(q["family"] for q in questions).items())),
               "tasks": dict(sorted(Counter(q["task"] for q in questions).items())), **dups}
    write_table(args.out, rows, QUESTION_SCHEMA)
    write_json(args.metrics, metrics)
    summary("items", started, n_items=len(rows), **{s: per_split.get(s, 0) for s in SPLITS},
            cross_split_duplicates=dups["cross_split_duplicates"])


if __name__ == "__main__":
    raise SystemExit(main())

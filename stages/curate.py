"""Stage `curate@{curated,random}`: select pool documents into the token budget.

Both start from the pool minus documents that contain a held-out question
(dev / eval / calibration items; `decision_pipeline.curation.decontaminate`), so neither
base model has seen an evaluation question with its answer.
curated: hygiene filters → MinHash near-duplicate removal → register
classifier scores (written, inspectable) → selection by `mode` / `overfill`
with a reserve tail. random: a seeded uniform draw from the (decontaminated)
pool at the same budget — the baseline curation must beat.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from decision_pipeline.common.hashing import make_rng, sha256_int
from decision_pipeline.common.io import atomic_dir, read_table, write_json, write_table
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from decision_pipeline.curation.classifier import save_model, score_docs, train_classifier
from decision_pipeline.curation.decontaminate import HeldOutQuestion, decontaminate
from decision_pipeline.curation.filters import apply_filters, build_filters
from decision_pipeline.curation.minhash import dedup
from decision_pipeline.curation.documents import validate_pool
from decision_pipeline.curation.selection import MODES, calibrate_chars_per_token, estimate_token_counts, random_selection, select
from decision_pipeline.decision.questions import load_items
from decision_pipeline.lm.bpe import load_tokenizer


@dataclass
class MinhashParams:
    num_perm: int = rule(min=1)
    bands: int = rule(min=1)
    rows: int = rule(min=1)
    ngram: int = rule(min=1)


@dataclass
class ClassifierParams:
    n_buckets: int = rule(min=16)
    epochs: int = rule(min=1)
    lr: float = rule(min=0.0)
    l2: float = rule(min=0.0)
    n_background: int = rule(min=1)


@dataclass
class CurateParams:
    budget_tokens: int = rule(min=1)
    mode: str = rule(choices=MODES)
    overfill: float = rule(min=0.0, max=1.0)
    reserve: float = rule(min=0.0)
    registers: list[str] = field(default_factory=list)
    filters: dict[str, Any] = field(default_factory=dict)
    minhash: MinhashParams = field(default_factory=lambda: MinhashParams(64, 16, 4, 5))
    classifier: ClassifierParams = field(default_factory=lambda: ClassifierParams(1 << 18, 8, 2.0, 1e-5, 200))
    calib_docs: int = rule(min=1, default=200)


SCORES_SCHEMA = pa.schema([("id", pa.string()), ("drop_reason", pa.string()), ("scores_json", pa.string())])


def _git_rev() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
    except OSError:
        return ""


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("name", choices=("curated", "random"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pool", default="data/pool/pool.parquet")
    ap.add_argument("--dev", default="data/pool/dev.parquet")
    ap.add_argument("--tokenizer", default="models/tokenizer")
    ap.add_argument("--items", default="data/items/items.parquet", help="held-out splits are decontaminated")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(CurateParams, "curate", args.params)
    seed = load_base(args.params).seed
    filters = build_filters(p.filters)  # unknown filter names fail here, before any output
    pool = validate_pool(read_table(args.pool), args.pool)
    dev = read_table(args.dev)
    tok = load_tokenizer(args.tokenizer)
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    sample = [pool[i]["text"] for i in make_rng(seed, "calib").permutation(len(pool))[:p.calib_docs]]
    chars_per_token = calibrate_chars_per_token(sample, count)

    held_out = [HeldOutQuestion(q["id"], q["question"], tuple(o["text"] for o in q["options"]))
                for q in load_items(args.items) if q["split"] != "pool"]
    clean = decontaminate(pool, held_out)
    kept, drops = apply_filters(clean.kept, filters)
    deduped = dedup(kept, p.minhash.num_perm, p.minhash.bands, p.minhash.rows, p.minhash.ngram, seed=seed)
    clf = train_classifier(dev, clean.kept, p.registers, n_background=p.classifier.n_background,
                           n_buckets=p.classifier.n_buckets, epochs=p.classifier.epochs, lr=p.classifier.lr,
                           l2=p.classifier.l2, seed=seed)
    if args.name == "curated":
        candidates = deduped.kept
        scores = score_docs(clf, candidates)
        tokens = estimate_token_counts([d["text"] for d in candidates], chars_per_token)
        selection = select(candidates, scores, tokens, p.budget_tokens, p.registers, p.mode, p.overfill, p.reserve)
    else:
        candidates = clean.kept
        scores = score_docs(clf, candidates)
        tokens = estimate_token_counts([d["text"] for d in candidates], chars_per_token)
        selection = random_selection(candidates, tokens, p.budget_tokens, make_rng(seed, "random_selection"),
                                     p.reserve, scores=scores, registers=p.registers)

    reasons = {d["id"]: "" for d in deduped.kept}
    reasons.update({i: "near_duplicate" for i in deduped.removed_ids})
    reasons.update({i: "contaminated" for i in clean.removed})
    score_by_id = {d["id"]: s for d, s in zip(candidates, scores)}
    rows = [{"id": d["id"], "drop_reason": reasons.get(d["id"], "filtered"),
             "scores_json": json.dumps({r: round(float(v), 6) for r, v in zip(p.registers, score_by_id[d["id"]])})
             if d["id"] in score_by_id else "{}"} for d in pool]
    provenance = {"selection": args.name, "source": args.pool, "tokenizer": args.tokenizer,
                  "chars_per_token": round(chars_per_token, 4), "budget_tokens": p.budget_tokens,
                  "config_hash": f"{sha256_int(json.dumps(vars(p), default=vars, sort_keys=True)):016x}",
                  "git_rev": _git_rev()}
    with atomic_dir(f"data/curate/{args.name}") as tmp:
        (tmp / "selection.json").write_text(selection.to_json())
        write_table(tmp / "scores.parquet", rows, SCORES_SCHEMA)
        save_model(clf, tmp / "classifier.npz")
        (tmp / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True))
    st = selection.stats
    metrics = {"pool_docs": len(pool),
               "decontamination": {"held_out_questions": len(held_out), "removed_docs": len(clean.removed),
                                   "questions_found": clean.questions_found},
               "after_filters": len(kept), "drops": drops,
               "dedup": {"removed": deduped.n_removed, "rate": round(deduped.dedup_rate, 6)},
               "classifier": {"heldout_accuracy": round(clf.report["heldout_accuracy"], 6),
                              "chance": round(clf.report["chance"], 6),
                              "register_accuracy": round(clf.report.get("register_accuracy") or 0.0, 6)},
               "chars_per_token": round(chars_per_token, 4), "selected_docs": selection.n_budget_docs,
               "selected_tokens_est": int(st.get("n_tokens", 0)), "reserve_tail_docs": len(selection.ids) - selection.n_budget_docs,
               "register_mix": st.get("per_register", {})}
    write_json(f"metrics/curate/{args.name}.json", metrics)
    summary(f"curate@{args.name}", started, pool=len(pool), contaminated=len(clean.removed), filtered=len(kept), dedup_removed=deduped.n_removed,
            selected=selection.n_budget_docs, clf_acc=metrics["classifier"]["heldout_accuracy"])


if __name__ == "__main__":
    raise SystemExit(main())

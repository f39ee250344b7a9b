"""The `curate` stage's whole run: decontaminate, filter, dedup, score, select.

Both selections start from the pool minus documents that contain a held-out
question (dev / eval / calibration items; ``decontaminate``), so neither base
model has seen an evaluation question with its answer.
curated: hygiene filters -> MinHash near-duplicate removal -> register
classifier scores -> selection by `mode` / `overfill` with a reserve tail.
filtered_random: the same hygiene filters and MinHash, then a seeded uniform draw
at the same budget (curated − filtered_random is what the classifier adds).
random: a seeded uniform draw from the decontaminated pool at the same budget
(filtered_random − random is what hygiene and dedup add). Every pool document gets a drop reason:
'' (candidate), 'contaminated', the name of the hygiene filter that dropped it
(datatrove style), 'exact_duplicate' or 'near_duplicate' (best-scored twin kept).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from decision_pipeline.common.hashing import make_rng, sha256_int
from decision_pipeline.common.params import rule
from decision_pipeline.common.raycluster import ENGINES
from decision_pipeline.curation.artifacts import artifact_shares, source_register
from decision_pipeline.curation.classifier import ClassifierParams, RegisterModel, score_docs, train_classifier
from decision_pipeline.curation.decontaminate import decontaminate, held_out_questions
from decision_pipeline.curation.filters import apply_filters, build_filters
from decision_pipeline.curation.minhash import MinhashParams, dedup
from decision_pipeline.curation.ray_kernels import CurateRayParams
from decision_pipeline.curation.selection import (
    MODES, Selection, calibrate_chars_per_token, check_params, estimate_token_counts, random_selection, select,
)

SELECTIONS = ("curated", "filtered_random", "random")
DEPTH_COUNTS = ("exact", "estimated")
SCORES_SCHEMA = pa.schema([("id", pa.string()), ("drop_reason", pa.string()), ("scores_json", pa.string())])
SCORES_ROW_GROUP = 32_768  # rows per row group of scores.parquet: the default pool's 10.5k is one


@dataclass
class CurateParams:
    """Budget, selection rule, hygiene filters, dedup and classifier of the `curate` stage."""
    budget_tokens: int = rule(min=1, doc="tokens the selection must fill (pretraining trains on exactly this many)")
    mode: str = rule(choices=MODES, doc="selection rule over register scores (see curation.selection)")
    overfill: float = rule(gt=0.0, doc="list depth: each register's list holds budget x overfill / n_registers "
                                       "depth tokens (see depth_count; tokens mode: weight x budget x overfill); research 1.0-4.5")
    reserve: float = rule(min=0.0, doc="reserve in budgets, counted from the end of the lists (the research's 2.5): "
                                       "what the budget needs of it is fallback, the rest a tail never trained on")
    registers: list[str] = rule(doc="target registers the classifier scores (dev registers)")
    filters: dict[str, Any] = rule(doc="hygiene filters {name: {param: value}} in run order; first failing one drops")
    minhash: MinhashParams = rule(doc="near-duplicate removal")
    classifier: ClassifierParams = rule(doc="register classifier")
    depth_count: str = rule(choices=DEPTH_COUNTS, doc="what list depths count: estimated = the research's rule, "
                                                       "chars/token calibrated on calib_docs pool documents (the "
                                                       "reserve makes up what the lists fall short); exact = the real "
                                                       "tokenizer's counts (no fallback at overfill >= 1)")
    calib_docs: int = rule(min=1, doc="pool documents tokenized to calibrate characters per token")
    weights: dict[str, float] = rule(doc="tokens mode: per-register token quotas (sum 1); "
                                                               "{} = equal")
    engine: str = rule(run_control=True, choices=ENGINES, doc="local: this process; ray: Ray Data over the "
                                                              "pool's Parquet shards on the cluster at ray.address "
                                                              "(the same selection, byte for byte)")
    ray: CurateRayParams = rule(run_control=True, doc="the Ray cluster (engine: ray only)")
    seed_offset: int = rule(min=0, doc="curation's seed = base.seed + offset (the classifier, MinHash, calibration "
                                       "sample and random draws); the noise study's curate_seed source varies it")


@dataclass
class Curation:
    """One selection's outputs: what the stage writes."""
    selection: Selection
    scores_rows: list[dict] | Iterable[pa.Table]  # SCORES_SCHEMA, one row per pool document (pool order);
    # the Ray engine yields row groups built as they are written (write_scores)
    classifier: RegisterModel
    provenance: dict
    metrics: dict


def write_scores(path: Path, rows: list[dict] | Iterable[pa.Table]) -> None:
    """scores.parquet in row groups of at most SCORES_ROW_GROUP rows, each written as it comes, so a
    million-document pool is never one table in memory; both engines write the same bytes."""
    chunks = (pa.Table.from_pylist(rows[k:k + SCORES_ROW_GROUP], schema=SCORES_SCHEMA)
              for k in range(0, len(rows), SCORES_ROW_GROUP)) if isinstance(rows, list) else rows
    with pq.ParquetWriter(path, SCORES_SCHEMA) as writer:
        for table in chunks:
            if table.schema != SCORES_SCHEMA or len(table) > SCORES_ROW_GROUP:
                raise ValueError(f"{path}: a row group of {len(table)} rows with schema {table.schema}")
            writer.write_table(table)


def config_hash(p: CurateParams) -> str:
    """Hash of the params that decide the selection (the engine and its cluster do not)."""
    content = {k: v for k, v in vars(p).items() if k not in ("engine", "ray")}
    return f"{sha256_int(json.dumps(content, default=vars, sort_keys=True)):016x}"


def code_fingerprint() -> str:
    """SHA-256 over the curation package's source files, for provenance.

    Why not the git revision: a cached output must hash the same whenever its inputs do,
    and the commit changes with every unrelated commit (the lock would never match).
    """
    import hashlib
    from pathlib import Path
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def classifier_metrics(report: dict) -> dict:
    """The classifier block: held-out accuracy of the kept checkpoint vs chance, and how it was chosen
    (every epoch's held-out accuracy and the kept epoch; see classifier.choose_checkpoint)."""
    rnd = lambda v: None if v is None else round(float(v), 6)  # noqa: E731
    return {"heldout_accuracy": rnd(report["heldout_accuracy"]), "chance": rnd(report["chance"]),
            "register_accuracy": round(report.get("register_accuracy") or 0.0, 6),
            "checkpoint": report["checkpoint"], "chosen_epoch": report["chosen_epoch"], "epochs": report["epochs"],
            "epoch_heldout_accuracy": [rnd(a) for a in report["epoch_heldout_accuracy"]],
            "n_heldout": report["n_heldout"]}


def curate(name: str, pool: list[dict], dev: list[dict], items: Sequence[dict],
           count_tokens: Callable[[str], int], p: CurateParams, seed: int, provenance: dict) -> Curation:
    """Run selection `name` (curated or random) over `pool`; `provenance` is recorded beside it."""
    if name not in SELECTIONS:
        raise ValueError(f"selection {name!r} is not one of {SELECTIONS}")
    filters = build_filters(p.filters)  # unknown filter names fail here, before any work
    check_params(p.registers, p.mode, p.overfill, p.reserve, p.budget_tokens, p.weights)  # and bad rule params
    sample = [pool[i]["text"] for i in make_rng(seed, "calib").permutation(len(pool))[:p.calib_docs]]
    chars_per_token = calibrate_chars_per_token(sample, count_tokens)
    held_out = held_out_questions(items)
    clean = decontaminate(pool, held_out)
    filtered = apply_filters(clean.kept, filters)
    clf = train_classifier(dev, clean.kept, p.registers, p.classifier, seed=seed)
    # the research's dedup: exact copies, then near-duplicates, visited in score order so the
    # best-scored twin survives (score = the doc's best register probability)
    deduped = dedup(filtered.kept, p.minhash, seed=seed, priority=score_docs(clf, filtered.kept).max(axis=1),
                    exact=True)
    candidates = clean.kept if name == "random" else deduped.kept
    scores = score_docs(clf, candidates)
    texts = [d["text"] for d in candidates]
    tokens = estimate_token_counts(texts, chars_per_token)
    exact = np.array([int(count_tokens(t)) for t in texts], dtype=np.int64)  # the budget is counted exactly
    # the research's rule (depth_count: estimated) sizes the lists in estimated tokens, so they hold a few %
    # less than the budget and the reserve makes up the rest (fallback); `exact` counts the real tokens
    depth_tokens = exact if p.depth_count == "exact" else tokens
    if name == "curated":
        selection = select(candidates, scores, depth_tokens, p.budget_tokens, p.registers, p.mode, p.overfill, p.reserve,
                           weights=p.weights, exact_tokens=exact)
    else:
        selection = random_selection(candidates, exact, p.budget_tokens, make_rng(seed, "random_selection"),
                                     p.reserve, scores=scores, registers=p.registers)
    chosen = slice(0, selection.n_budget_docs)
    pos = {d["id"]: k for k, d in enumerate(candidates)}
    chosen_idx = [pos[i] for i in selection.ids[chosen]]
    sel_chars = sum(len(texts[k]) for k in chosen_idx)

    reasons = {d["id"]: "" for d in deduped.kept}
    reasons.update(filtered.dropped_by)
    reasons.update({i: "near_duplicate" for i in deduped.removed_ids})
    reasons.update({i: "exact_duplicate" for i in deduped.exact_ids})
    reasons.update({i: "contaminated" for i in clean.removed})
    score_by_id = {d["id"]: s for d, s in zip(candidates, scores)}
    rows = [{"id": d["id"], "drop_reason": reasons[d["id"]],
             "scores_json": json.dumps({r: round(float(v), 6) for r, v in zip(p.registers, score_by_id[d["id"]])})
             if d["id"] in score_by_id else "{}"} for d in pool]
    provenance = {**provenance, "selection": name, "chars_per_token": round(chars_per_token, 4),
                  "budget_tokens": p.budget_tokens,
                  "config_hash": config_hash(p),
                  "code_fingerprint": code_fingerprint()}
    st = selection.stats
    metrics = {"pool_docs": len(pool),
               "decontamination": {"held_out_questions": len(held_out), "removed_docs": len(clean.removed),
                                   "questions_found": clean.questions_found},
               "after_filters": len(filtered.kept), "drops": filtered.counts, "drops_all": filtered.counts_all,
               "dedup": {"removed": deduped.n_removed, "exact": len(deduped.exact_ids),
                         "near": deduped.n_removed - len(deduped.exact_ids), "rate": round(deduped.dedup_rate, 6),
                         "kept_twin": "best_scored"},
               "classifier": classifier_metrics(clf.report),
               "chars_per_token": round(chars_per_token, 4), "selected_docs": selection.n_budget_docs,
               "selected_tokens": int(st["n_tokens"]),
               "selected_tokens_est": int(tokens[chosen_idx].sum()),
               "selected_chars_per_token": round(sel_chars / max(int(st["n_tokens"]), 1), 4),
               "reserve_tail_docs": st["tail_docs"], "reserve_tail_tokens": st["tail_tokens"],
               # curated: the reserve counted from the end of the lists (the research's rule), of which the
               # budget used `fallback_*`; random arms: the tail after the budget cut
               "reserve_tokens": st.get("reserve_tokens", st["tail_tokens"]),
               "reserve_tail_short": st.get("reserve_short", st.get("tail_short")),
               "fallback_docs": st["fallback_docs"], "fallback_tokens": st.get("fallback_tokens", 0),
               "fallback_share": st.get("fallback_share", 0.0),
               "rule": {**{k: st.get(k) for k in ("mode", "overfill", "reserve", "weights")},
                        "depth_count": p.depth_count if name == "curated" else None},
               # the realised mix by the list that picked each document (random: by argmax)
               "register_mix": st.get("by_list") or st.get("argmax_mix", {}),
               "register_mix_by": "list" if "by_list" in st else "argmax",
               "argmax_mix": st.get("argmax_mix", {}),
               "artifacts": selection_artifacts([candidates[k] for k in chosen_idx], scores[chosen_idx], p.registers)}
    return Curation(selection, rows, clf, provenance, metrics)


def selection_artifacts(chosen: Sequence[dict], scores: np.ndarray, registers: Sequence[str]) -> dict:
    """The artifact-token diagnosis of the budget's documents (curation.artifacts), per register by the
    classifier's argmax (what every arm has), and by the generator's register where the pool records it
    (the attribution ingest's pool figures use, so the two compare)."""
    argmax = [registers[int(k)] for k in scores.argmax(axis=1)] if len(chosen) else []
    out = {**artifact_shares(zip(argmax, (d["text"] for d in chosen))), "register_by": "classifier_argmax"}
    source = [source_register(d) for d in chosen]
    if "unlabelled" not in source:
        out["by_source_register"] = artifact_shares(zip(source, (d["text"] for d in chosen)))["by_register"]
    return out

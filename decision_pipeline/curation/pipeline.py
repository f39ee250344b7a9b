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

from decision_pipeline.common.hashing import make_rng
from decision_pipeline.common.io import read_table
from decision_pipeline.common.params import rule
from decision_pipeline.common.raycluster import ENGINES
from decision_pipeline.curation.classifier import ClassifierParams, RegisterModel, score_docs, train_classifier
from decision_pipeline.curation.decontaminate import decontaminate, held_out_questions
from decision_pipeline.curation.documents import validate_pool
from decision_pipeline.curation.filters import apply_filters, build_filters
from decision_pipeline.curation.minhash import MinhashParams, dedup
from decision_pipeline.curation.outcome import Screening, settle
from decision_pipeline.curation.ray_kernels import CurateRayParams
from decision_pipeline.curation.selection import (MODES, Selection, calibrate_chars_per_token, check_params,
                                                  estimate_token_counts)
from decision_pipeline.questions.schema import load_items

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


def curate_files(name: str, pool_path: str, dev_path: str, items_path: str, tokenizer_path: str, p: CurateParams,
                 seed: int, provenance: dict) -> Curation:
    """`curate` from the stage's files (`curate.engine: local`; ray_engine.curate_on_ray takes the same
    arguments): the pool validated and held in this process, tokens counted by the tokenizer."""
    # transformers (and torch beneath it) only here: the stage's `--help` and a wrong flag answer in under
    # a second instead of paying ~4 s of imports
    from decision_pipeline.lm.bpe import load_tokenizer
    pool = validate_pool(read_table(pool_path), pool_path)
    tok = load_tokenizer(tokenizer_path)
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    return curate(name, pool, read_table(dev_path), load_items(items_path), count, p, seed, provenance)


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
    n_chars = np.fromiter((len(t) for t in texts), np.int64, len(texts))
    screening = Screening(len(pool), len(held_out), len(clean.removed), clean.questions_found, len(filtered.kept),
                          filtered.counts, filtered.counts_all, deduped.n_removed, len(deduped.exact_ids),
                          deduped.dedup_rate)
    selection, provenance, metrics = settle(name, p, seed, candidates, scores, tokens, exact, n_chars, chars_per_token,
                                            screening, clf, provenance, lambda at: [candidates[k] for k in at])

    reasons = {d["id"]: "" for d in deduped.kept}
    reasons.update(filtered.dropped_by)
    reasons.update({i: "near_duplicate" for i in deduped.removed_ids})
    reasons.update({i: "exact_duplicate" for i in deduped.exact_ids})
    reasons.update({i: "contaminated" for i in clean.removed})
    score_by_id = {d["id"]: s for d, s in zip(candidates, scores)}
    rows = [{"id": d["id"], "drop_reason": reasons[d["id"]],
             "scores_json": json.dumps({r: round(float(v), 6) for r, v in zip(p.registers, score_by_id[d["id"]])})
             if d["id"] in score_by_id else "{}"} for d in pool]
    return Curation(selection, rows, clf, provenance, metrics)

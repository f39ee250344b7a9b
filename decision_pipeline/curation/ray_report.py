"""What `curate.engine: ray` writes, built from the compact per-document table.

Why its own module: `pipeline.curate` assembles its rows, provenance and metrics from lists of
documents; the Ray engine has arrays of pool positions instead, so it rebuilds the same
structures here, key for key (the tests compare the files of both engines byte for byte).
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decision_pipeline.curation.classifier import RegisterModel
from decision_pipeline.curation.decontaminate import HeldOutQuestion
from decision_pipeline.curation.pipeline import (SCORES_ROW_GROUP, SCORES_SCHEMA, Curation, classifier_metrics,
                                                code_fingerprint, config_hash, selection_artifacts)
from decision_pipeline.curation.selection import Selection


def _scores_groups(registers: Sequence[str], table: pa.Table, dedup: Any, cand: np.ndarray,
                   cand_scores: np.ndarray) -> Iterator[pa.Table]:
    """SCORES_SCHEMA rows (`pipeline.curate`'s, key for key) one row group at a time: Python strings
    exist for one group's documents only."""
    n = len(table)
    code = np.zeros(n, np.int8)  # 0 kept or filtered (its first failed filter), 1 near, 2 exact, 3 contaminated
    code[dedup.removed] = 1
    code[dedup.exact] = 2
    code[pc.not_equal(table.column("contam"), "").to_numpy(zero_copy_only=False)] = 3
    fixed = {1: "near_duplicate", 2: "exact_duplicate", 3: "contaminated"}
    for lo in range(0, n, SCORES_ROW_GROUP):
        hi = min(n, lo + SCORES_ROW_GROUP)
        failed = table.column("failed").slice(lo, hi - lo).to_pylist()
        reasons = [fixed[c] if c else f.split(",", 1)[0] for c, f in zip(code[lo:hi].tolist(), failed)]
        k = np.searchsorted(cand, np.arange(lo, hi))  # cand is in pool order: a scored document's row
        scored = (k < len(cand)) & (cand[np.minimum(k, len(cand) - 1)] == np.arange(lo, hi)) if len(cand) else \
            np.zeros(hi - lo, bool)
        blobs = [json.dumps({r: round(float(v), 6) for r, v in zip(registers, cand_scores[j])}) if ok else "{}"
                 for j, ok in zip(k.tolist(), scored.tolist())]
        yield pa.table([table.column("id").slice(lo, hi - lo), pa.array(reasons, pa.string()),
                        pa.array(blobs, pa.string())], schema=SCORES_SCHEMA)


def _drops(names: list[str], table: pa.Table) -> tuple[dict, dict, int, set]:
    """Filter drop counts (first failed filter, and every failed filter) of clean documents, and the
    contaminated documents with the held-out questions found in them; counted over distinct values."""
    counts, counts_all = dict.fromkeys(names, 0), dict.fromkeys(names, 0)
    contam = table.column("contam")
    dirty = pc.not_equal(contam, "")
    failed = pc.filter(table.column("failed"), pc.invert(dirty))
    for entry in pc.value_counts(failed).to_pylist():
        f, k = entry["values"], entry["counts"]
        if f:
            parts = f.split(",")
            counts[parts[0]] += k
            for part in parts:
                counts_all[part] += k
    found: set = set()
    for c in pc.filter(contam, dirty).to_pylist():
        found.update(json.loads(c))
    return counts, counts_all, int(pc.sum(dirty).as_py() or 0), found


def assemble(name: str, p: Any, table: pa.Table, n_filtered: int, dedup: Any, cand: np.ndarray,
             cand_scores: np.ndarray, est: np.ndarray, selection: Selection, clf: RegisterModel,
             held_out: Sequence[HeldOutQuestion], chars_per_token: float, provenance: dict,
             chosen_docs: dict[int, dict]) -> Curation:
    """The Curation `pipeline.curate` returns for the same pool, from positions instead of documents
    (`table`: id, n_chars, contam, failed per pool document in pool order; `chosen_docs`: the budget's
    documents whole, by pool position, for the artifact diagnosis)."""
    counts, counts_all, removed_docs, found = _drops(list(p.filters), table)
    chosen_idx = selection.index[:selection.n_budget_docs]
    sel_chars = int(pc.sum(table.column("n_chars").take(pa.array(cand[chosen_idx]))).as_py() or 0) \
        if len(chosen_idx) else 0
    provenance = {**provenance, "selection": name, "chars_per_token": round(chars_per_token, 4),
                  "budget_tokens": p.budget_tokens, "config_hash": config_hash(p),
                  "code_fingerprint": code_fingerprint()}
    st = selection.stats
    n_removed = len(dedup.removed)
    metrics = {"pool_docs": len(table),
               "decontamination": {"held_out_questions": len(held_out), "removed_docs": removed_docs,
                                   "questions_found": len(found)},
               "after_filters": n_filtered, "drops": counts, "drops_all": counts_all,
               "dedup": {"removed": n_removed, "exact": len(dedup.exact), "near": n_removed - len(dedup.exact),
                         "rate": round(dedup.rate, 6), "kept_twin": "best_scored"},
               "classifier": classifier_metrics(clf.report),
               "chars_per_token": round(chars_per_token, 4), "selected_docs": selection.n_budget_docs,
               "selected_tokens": int(st["n_tokens"]),
               "selected_tokens_est": int(est[chosen_idx].sum()),
               "selected_chars_per_token": round(sel_chars / max(int(st["n_tokens"]), 1), 4),
               "reserve_tail_docs": st["tail_docs"], "reserve_tail_tokens": st["tail_tokens"],
               "reserve_tokens": st.get("reserve_tokens", st["tail_tokens"]),
               "reserve_tail_short": st.get("reserve_short", st.get("tail_short")),
               "fallback_docs": st["fallback_docs"], "fallback_tokens": st.get("fallback_tokens", 0),
               "fallback_share": st.get("fallback_share", 0.0),
               "rule": {**{k: st.get(k) for k in ("mode", "overfill", "reserve", "weights")},
                        "depth_count": p.depth_count if name == "curated" else None},
               "register_mix": st.get("by_list") or st.get("argmax_mix", {}),
               "register_mix_by": "list" if "by_list" in st else "argmax",
               "argmax_mix": st.get("argmax_mix", {}),
               "artifacts": selection_artifacts([chosen_docs[int(cand[k])] for k in chosen_idx],
                                                cand_scores[chosen_idx], p.registers)}
    return Curation(selection, _scores_groups(p.registers, table, dedup, cand, cand_scores), clf, provenance,
                    metrics)

"""What `curate.engine: ray` writes, built from the compact per-document table.

Why its own module: `pipeline.curate` assembles its rows, provenance and metrics from lists of
documents; the Ray engine has arrays of pool positions instead, so it rebuilds the same
structures here, key for key (the tests compare the files of both engines byte for byte).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from decision_pipeline.curation.classifier import RegisterModel
from decision_pipeline.curation.decontaminate import HeldOutQuestion
from decision_pipeline.curation.pipeline import (Curation, classifier_metrics, code_fingerprint, config_hash,
                                                selection_artifacts)
from decision_pipeline.curation.selection import Selection


def assemble(name: str, p: Any, ids: list[str], n_chars: np.ndarray, contam: list[str], failed: list[str],
             filt_pos: np.ndarray, dedup: Any, cand: np.ndarray, scores: np.ndarray, est: np.ndarray,
             selection: Selection, clf: RegisterModel, held_out: Sequence[HeldOutQuestion],
             chars_per_token: float, provenance: dict, chosen_docs: dict[int, dict]) -> Curation:
    """The Curation `pipeline.curate` returns for the same pool, from positions instead of documents
    (`chosen_docs`: the budget's documents whole, by pool position, for the artifact diagnosis)."""
    names = list(p.filters)
    counts, counts_all = dict.fromkeys(names, 0), dict.fromkeys(names, 0)
    reasons = [""] * len(ids)
    removed_docs, found = 0, set()
    for i, (c, f) in enumerate(zip(contam, failed)):
        if c:
            removed_docs += 1
            found.update(json.loads(c))
            reasons[i] = "contaminated"
        elif f:
            parts = f.split(",")
            counts[parts[0]] += 1
            for part in parts:
                counts_all[part] += 1
            reasons[i] = parts[0]
    for i in dedup.removed:
        reasons[i] = "near_duplicate"
    for i in dedup.exact:
        reasons[i] = "exact_duplicate"
    scored = np.zeros(len(ids), bool)
    scored[cand] = True
    rows = [{"id": d, "drop_reason": reasons[i],
             "scores_json": json.dumps({r: round(float(v), 6) for r, v in zip(p.registers, scores[i])})
             if scored[i] else "{}"} for i, d in enumerate(ids)]
    pos_in_cand = {ids[int(i)]: k for k, i in enumerate(cand)}
    chosen_idx = [pos_in_cand[i] for i in selection.ids[:selection.n_budget_docs]]
    sel_chars = int(n_chars[cand][chosen_idx].sum()) if chosen_idx else 0
    provenance = {**provenance, "selection": name, "chars_per_token": round(chars_per_token, 4),
                  "budget_tokens": p.budget_tokens, "config_hash": config_hash(p),
                  "code_fingerprint": code_fingerprint()}
    st = selection.stats
    n_removed = len(dedup.removed)
    metrics = {"pool_docs": len(ids),
               "decontamination": {"held_out_questions": len(held_out), "removed_docs": removed_docs,
                                   "questions_found": len(found)},
               "after_filters": len(filt_pos), "drops": counts, "drops_all": counts_all,
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
                                                scores[cand][chosen_idx], p.registers)}
    return Curation(selection, rows, clf, provenance, metrics)

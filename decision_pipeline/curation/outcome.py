"""What a curate run decides and records, for both engines: the selection branch, provenance, metrics.

Why one function: `pipeline.curate` (documents in this process) and `ray_engine.curate_on_ray` (a
compact table of pool positions) screen the pool their own ways, but from the candidates on the
research's rule is one rule: the list depths counted as `curate.depth_count` says, the curated fill
or a seeded random draw, and the same provenance and metrics, key for key (the Ray tests compare
both engines' files byte for byte). Two copies of that rule could drift; here is the only one.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from decision_pipeline.common.hashing import make_rng, sha256_int
from decision_pipeline.curation.artifacts import artifact_shares, source_register
from decision_pipeline.curation.classifier import RegisterModel
from decision_pipeline.curation.selection import Selection, random_selection, select


@dataclass(frozen=True)
class Screening:
    """What came before the selection, counted (each engine counts it over its own structures)."""
    pool_docs: int
    held_out_questions: int
    contaminated: int            # pool documents holding a held-out question
    questions_found: int         # distinct held-out questions found in them
    after_filters: int
    drops: dict                  # clean documents by the first hygiene filter they failed
    drops_all: dict              # ... by every filter they failed
    dedup_removed: int           # exact and near duplicates
    dedup_exact: int
    dedup_rate: float


def config_hash(p: Any) -> str:
    """Hash of the params that decide the selection (the engine and its cluster do not)."""
    content = {k: v for k, v in vars(p).items() if k not in ("engine", "ray")}
    return f"{sha256_int(json.dumps(content, default=vars, sort_keys=True)):016x}"


def code_fingerprint() -> str:
    """SHA-256 over the curation package's source files, for provenance.

    Why not the git revision: a cached output must hash the same whenever its inputs do,
    and the commit changes with every unrelated commit (the lock would never match).
    """
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


def settle(name: str, p: Any, seed: int, candidates: Any, scores: np.ndarray, est_tokens: np.ndarray,
           exact_tokens: np.ndarray, n_chars: np.ndarray, chars_per_token: float, screening: Screening,
           clf: RegisterModel, provenance: dict, budget_docs: Callable[[np.ndarray], Sequence[dict]]
           ) -> tuple[Selection, dict, dict]:
    """Selection `name` over the candidates, its provenance and its metrics.

    `candidates` (documents or their ids), `scores`, `est_tokens`, `exact_tokens` and `n_chars` are
    aligned, one entry per candidate; `budget_docs(index)` returns the whole documents at those
    candidate positions (the budget's, for the artifact diagnosis; the Ray engine fetches them from
    the cluster). `p` is the CurateParams.
    """
    # the research's rule (depth_count: estimated) sizes the lists in estimated tokens, so they hold a few %
    # less than the budget and the reserve makes up the rest (fallback); `exact` counts the real tokens
    depth_tokens = exact_tokens if p.depth_count == "exact" else est_tokens
    if name == "curated":
        selection = select(candidates, scores, depth_tokens, p.budget_tokens, p.registers, p.mode, p.overfill,
                           p.reserve, weights=p.weights, exact_tokens=exact_tokens)
    else:
        selection = random_selection(candidates, exact_tokens, p.budget_tokens, make_rng(seed, "random_selection"),
                                     p.reserve, scores=scores, registers=p.registers)
    chosen = selection.index[:selection.n_budget_docs]
    chosen_docs = budget_docs(chosen)
    sel_chars = int(n_chars[chosen].sum())
    provenance = {**provenance, "selection": name, "chars_per_token": round(chars_per_token, 4),
                  "budget_tokens": p.budget_tokens, "config_hash": config_hash(p),
                  "code_fingerprint": code_fingerprint()}
    st = selection.stats
    s = screening
    metrics = {"pool_docs": s.pool_docs,
               "decontamination": {"held_out_questions": s.held_out_questions, "removed_docs": s.contaminated,
                                   "questions_found": s.questions_found},
               "after_filters": s.after_filters, "drops": s.drops, "drops_all": s.drops_all,
               "dedup": {"removed": s.dedup_removed, "exact": s.dedup_exact, "near": s.dedup_removed - s.dedup_exact,
                         "rate": round(s.dedup_rate, 6), "kept_twin": "best_scored"},
               "classifier": classifier_metrics(clf.report),
               "chars_per_token": round(chars_per_token, 4), "selected_docs": selection.n_budget_docs,
               "selected_tokens": int(st["n_tokens"]),
               "selected_tokens_est": int(est_tokens[chosen].sum()),
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
               "artifacts": selection_artifacts(chosen_docs, scores[chosen], p.registers)}
    return selection, provenance, metrics

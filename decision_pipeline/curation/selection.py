"""Select scored documents into a fixed token budget, deterministically.

Ranking: scores are quantised to integers (``quantize_scores``, 1e-6 steps) so float
noise cannot reorder documents; every ranking is a stable sort on (score descending,
doc id ascending). A document's *home register* is its argmax register; ties go to the
register listed first, so registers claim documents in a fixed order and each document
is offered to exactly one register.

Modes (the primary selection):

* ``docs``: equal document COUNT per register. Registers take turns in their fixed
  order, each taking its best remaining home document, so the ids come out round-robin
  and counts differ by at most one.
* ``tokens``: equal token share. The register with the fewest tokens so far (ties: the
  earlier register) takes its next home document.
* ``pooled``: one ranking of all documents by their max register score.

``overfill`` in (0, 1] is the fraction of each register's ranked home list that may be
used (for ``pooled``: of the single ranking); 1.0 = every document whose argmax is that
register. The primary selection stops the moment the budget is met, or when a register
(``pooled``: the ranking) runs out: docs/tokens modes stop there to keep the mix exact.

Reserve: the unselected documents ranked by max register score (then id) are the
*reserve*. If the primary selection falls short, reserve documents fill the budget
("reserve used"). Then a *tail* of further reserve documents worth ``reserve * budget``
tokens is appended, so a packer whose real token counts come out lower than these
estimates still never underfills. ``Selection.ids[:n_budget_docs]`` meets the budget
exactly: their token sum is >= budget and drops below it without the last one; the packer
cuts that last document. Budget larger than the pool's tokens -> ``PipelineError``.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from decision_pipeline.common.errors import PipelineError

MODES = ("docs", "tokens", "pooled")
SCALE = 1_000_000


@dataclass(frozen=True)
class Selection:
    """Ordered ids (primary, reserve fill, tail); ``ids[:n_budget_docs]`` meets the budget."""

    ids: list[str]
    n_budget_docs: int
    stats: dict = field(default_factory=dict)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys): two identical selections give identical bytes."""
        return json.dumps({"ids": self.ids, "n_budget_docs": self.n_budget_docs, "stats": self.stats},
                          sort_keys=True, indent=1)


def quantize_scores(scores: np.ndarray, scale: int = SCALE) -> np.ndarray:
    """Round probabilities to integer multiples of 1/scale (int64); integer input passes through."""
    s = np.asarray(scores)
    if s.dtype.kind in "iu":
        return s.astype(np.int64)
    if not np.isfinite(s).all():
        raise PipelineError("selection: scores contain NaN/inf; re-run the classifier stage")
    return np.rint(s * scale).astype(np.int64)


def calibrate_chars_per_token(texts: Sequence[str], count_tokens_fn: Callable[[str], int]) -> float:
    """Characters per token on a sample, measured with the real tokenizer."""
    chars = sum(len(t) for t in texts)
    toks = sum(int(count_tokens_fn(t)) for t in texts)
    if chars == 0 or toks == 0:
        raise PipelineError("calibrate_chars_per_token: sample has no text/tokens; use a non-empty sample")
    return chars / toks


def estimate_token_counts(texts: Sequence[str], chars_per_token: float) -> np.ndarray:
    """ceil(len/chars_per_token) per text (>= 1 for a non-empty text), int64."""
    if not chars_per_token > 0:
        raise PipelineError(f"chars_per_token must be > 0, got {chars_per_token!r}; re-run calibration")
    return np.array([math.ceil(len(t) / chars_per_token) for t in texts], dtype=np.int64)


def _ids(docs: Sequence[Mapping] | Sequence[str]) -> list[str]:
    return [d if isinstance(d, str) else d["id"] for d in docs]


def rank(q: np.ndarray, id_rank: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """Indices sorted by score descending, then id ascending (``id_rank`` = position in sorted ids)."""
    idx = np.arange(len(q)) if idx is None else np.asarray(idx)
    return idx[np.lexsort((id_rank[idx], -q[idx]))]


def _check(ids: list[str], tokens: np.ndarray, budget: int, reserve: float) -> np.ndarray:
    t = np.asarray(tokens)
    if t.shape != (len(ids),) or t.dtype.kind not in "iu" or (t < 0).any():
        raise PipelineError(f"selection: token_counts must be {len(ids)} non-negative integers (one per doc)")
    if len(set(ids)) != len(ids):
        raise PipelineError("selection: duplicate doc ids; dedupe/validate the pool first")
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget <= 0:
        raise PipelineError(f"selection.budget_tokens: got {budget!r}; must be a positive integer")
    if not 0 <= reserve <= 10:
        raise PipelineError(f"selection.reserve: got {reserve!r}; must be a fraction of the budget in [0, 10]")
    available = int(t.sum())
    if available < budget:
        raise PipelineError(f"selection: budget {budget} tokens exceeds the {available} tokens available in the "
                            f"filtered pool ({len(ids)} docs); lower selection.budget_tokens or enlarge the pool")
    return t.astype(np.int64)


def _finish(primary: list[int], tokens: np.ndarray, budget: int, reserve: float,
            reserve_rank: np.ndarray, stats: dict) -> tuple[list[int], int, dict]:
    """Append reserve fill (if the primary fell short) and the tail; record the counts."""
    primary_tokens = int(tokens[primary].sum()) if primary else 0
    chosen = set(primary)
    rest = [int(i) for i in reserve_rank if int(i) not in chosen]
    out, total, k = list(primary), primary_tokens, 0
    while total < budget:  # _check guarantees the pool can fill the budget
        out.append(rest[k])
        total += int(tokens[rest[k]])
        k += 1
    n_budget = len(out)
    tail_tokens = 0
    while tail_tokens < reserve * budget and k < len(rest):
        out.append(rest[k])
        tail_tokens += int(tokens[rest[k]])
        k += 1
    stats.update(
        n_docs=n_budget, n_tokens=total, n_primary_docs=len(primary), primary_tokens=primary_tokens,
        reserve_used_docs=n_budget - len(primary), reserve_used_tokens=total - primary_tokens,
        tail_docs=len(out) - n_budget, tail_tokens=tail_tokens, tail_short=bool(tail_tokens < reserve * budget),
    )
    return out, n_budget, stats


def register_mix(idx: Sequence[int], home: np.ndarray, registers: Sequence[str], tokens: np.ndarray) -> dict:
    """Docs and tokens per home register for the given doc indices."""
    idx = np.asarray(idx, dtype=np.int64)
    return {r: {"docs": int((home[idx] == i).sum()), "tokens": int(tokens[idx][home[idx] == i].sum())}
            for i, r in enumerate(registers)}


def select(docs: Sequence[Mapping] | Sequence[str], scores: np.ndarray, token_counts: np.ndarray, budget: int,
           registers: Sequence[str], mode: str, overfill: float, reserve: float) -> Selection:
    """Primary selection by ``mode`` + reserve fill + tail; see the module docstring for the rules."""
    ids = _ids(docs)
    registers = list(registers)
    tokens = _check(ids, token_counts, budget, reserve)
    if not registers or len(set(registers)) != len(registers):
        raise PipelineError(f"selection.registers: got {registers}; need a non-empty list of unique names")
    if mode not in MODES:
        raise PipelineError(f"selection.mode: unknown mode '{mode}'; use one of {', '.join(MODES)}")
    if isinstance(overfill, bool) or not isinstance(overfill, (int, float)) or not 0 < overfill <= 1:
        raise PipelineError(f"selection.overfill: got {overfill!r}; must be in (0, 1] (1.0 = whole ranked list)")
    q = quantize_scores(scores)
    if q.shape != (len(ids), len(registers)):
        raise PipelineError(f"selection: scores have shape {q.shape}, expected ({len(ids)}, {len(registers)}) "
                            "= (docs, registers); score the same filtered pool")
    id_rank = np.empty(len(ids), dtype=np.int64)
    id_rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    home = q.argmax(axis=1)  # first max wins: registers claim in their listed order
    best = q.max(axis=1)
    pooled = rank(best, id_rank)
    stats: dict = {"mode": mode, "budget_tokens": int(budget), "overfill": float(overfill),
                   "reserve": float(reserve), "exhausted": None}
    primary: list[int] = []
    total = 0
    if mode == "pooled":
        cand = pooled[:math.ceil(overfill * len(pooled))]
        stats["candidates"] = len(cand)
        for i in cand:
            if total >= budget:
                break
            primary.append(int(i))
            total += int(tokens[i])
        if total < budget:
            stats["exhausted"] = "pooled"
    else:
        lists = []
        for r in range(len(registers)):
            own = rank(q[:, r], id_rank, np.flatnonzero(home == r))
            lists.append(own[:math.ceil(overfill * len(own))].tolist())
        stats["candidates"] = {reg: len(lst) for reg, lst in zip(registers, lists)}
        pos = [0] * len(registers)
        load = [0] * len(registers)  # docs or tokens taken per register
        while total < budget:
            r = min(range(len(registers)), key=lambda j: (load[j], j))
            if pos[r] >= len(lists[r]):
                stats["exhausted"] = registers[r]
                break
            i = lists[r][pos[r]]
            pos[r] += 1
            primary.append(i)
            total += int(tokens[i])
            load[r] += 1 if mode == "docs" else int(tokens[i])
    order, n_budget, stats = _finish(primary, tokens, budget, reserve, pooled, stats)
    stats["per_register"] = register_mix(order[:n_budget], home, registers, tokens)
    stats["primary_per_register"] = register_mix(primary, home, registers, tokens)
    return Selection([ids[i] for i in order], n_budget, stats)


def random_selection(docs: Sequence[Mapping] | Sequence[str], token_counts: np.ndarray, budget: int,
                     rng: np.random.Generator, reserve: float, scores: np.ndarray | None = None,
                     registers: Sequence[str] | None = None) -> Selection:
    """Uniform random baseline at the same budget: a seeded permutation, taken until the budget is met.

    Pass ``scores``/``registers`` to get the realised register mix (by argmax) in the stats.
    """
    ids = _ids(docs)
    tokens = _check(ids, token_counts, budget, reserve)
    perm = rng.permutation(len(ids))
    stats: dict = {"mode": "random", "budget_tokens": int(budget), "reserve": float(reserve)}
    order, n_budget, stats = _finish([], tokens, budget, reserve, perm, stats)
    stats.update(n_primary_docs=n_budget, primary_tokens=stats["n_tokens"], reserve_used_docs=0,
                 reserve_used_tokens=0)
    if scores is not None and registers is not None:
        q = quantize_scores(scores)
        stats["per_register"] = register_mix(order[:n_budget], q.argmax(axis=1), list(registers), tokens)
    return Selection([ids[i] for i in order], n_budget, stats)

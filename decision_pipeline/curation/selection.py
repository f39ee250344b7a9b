"""Select scored documents into a fixed token budget: the curation research's fill rules.

Every mode is a pure function of (scores, valid mask, depth tokens, exact tokens, params)
and returns one *sequence* of document indices; the trainer takes ``ids[:n_budget_docs]``
and the rest is the reserve tail it never reaches.

Ranking: scores are quantised to integers (``quantize_scores``, 1e-6 steps) so float noise
cannot reorder documents; a ranking is a stable sort on (score descending, doc id ascending)
over the eligible (``valid``) documents only.

Lists and ownership: register r (in ``registers`` order) walks its FULL ranking of all eligible
documents by its own score r, skips documents an earlier register already owns (first-come
ownership in register order), and takes documents until their depth tokens (``token_counts``:
the research's chars/token estimate, or the exact counts when ``curate.depth_count: exact``)
reach its depth.

Modes:

* ``docs`` (default, the research's winner): depth = budget x overfill / n_registers estimated
  tokens per register. The lists are interleaved round-robin in register order (one document
  per register per round: equal document counts); an exhausted list drops out and the
  round-robin continues over the remaining lists to their ends.
* ``tokens``: register r's quota is weights[r] x budget tokens, its depth quota x overfill.
  The next document comes from the register with the smallest share of its quota filled so
  far (ties: earlier register); exhausted lists drop out, the others continue.
* ``pooled``: one ranking by the SUM of register probabilities (not the max), depth
  budget x overfill, taken in rank order.

Reserve (the research's rule): after the lists, each register continues down its full ranking
(skipping documents already in the sequence), interleaved by the same schedule (pooled: the ranking
continues); the reserve holds ``reserve x budget`` exact tokens counted from the END OF THE LISTS.
Reserve documents the budget needs are *fallback* (the research's winner drew about a third of its
tokens there: its estimated depths fell short); the rest of the reserve is the tail. The budget cut
uses the EXACT token counts (the real tokenizer) - ``token_counts`` only set list depths:
``ids[:n_budget_docs]`` has >= budget exact tokens and drops below it without its last document. A
pool whose eligible documents cannot fill the budget even with the reserve -> ``PipelineError``; a
reserve the pool cannot complete is flagged (``tail_short``).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decision_pipeline.common.errors import PipelineError

MODES = ("docs", "tokens", "pooled")
SCALE = 1_000_000


@dataclass(frozen=True)
class Selection:
    """Ordered ids (budget part, then the reserve tail); ``ids[:n_budget_docs]`` meets the budget."""

    ids: list[str]
    n_budget_docs: int
    stats: dict = field(default_factory=dict)
    # positions of ``ids`` in the documents given to the rule (not serialized): the Ray engine maps the
    # budget back to pool positions with it instead of a dict over every candidate id
    index: np.ndarray | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys): two identical selections give identical bytes."""
        return json.dumps({"ids": self.ids, "n_budget_docs": self.n_budget_docs, "stats": self.stats},
                          sort_keys=True, indent=1)


def quantize_scores(scores: np.ndarray, scale: int = SCALE) -> np.ndarray:
    """Round probabilities to integer multiples of 1/scale; integer input passes through (int64).

    int32 where the values fit, built a column at a time: with a million candidates the quantized
    scores and their rankings are the Ray engine's driver peak (the order is the same either way)."""
    s = np.asarray(scores)
    if s.dtype.kind in "iu":
        return s.astype(np.int64)
    if not np.isfinite(s).all():
        raise PipelineError("selection: scores contain NaN/inf; re-run the classifier stage")
    if s.ndim != 2 or (s.size and float(np.abs(s).max()) * scale >= 2**31 - 1):
        return np.rint(s * scale).astype(np.int64)
    q = np.empty(s.shape, np.int32)
    for r in range(s.shape[1]):
        q[:, r] = np.rint(s[:, r] * scale)
    return q


def calibrate_chars_per_token(texts: Sequence[str], count_tokens_fn: Callable[[str], int]) -> float:
    """Characters per token on a sample, measured with the real tokenizer."""
    chars = sum(len(t) for t in texts)
    toks = sum(int(count_tokens_fn(t)) for t in texts)
    if chars == 0 or toks == 0:
        raise PipelineError("calibrate_chars_per_token: sample has no text/tokens; use a non-empty sample")
    return chars / toks


def estimate_token_counts(texts: Sequence[str], chars_per_token: float) -> np.ndarray:
    """ceil(len/chars_per_token) per text (>= 1 for a non-empty text), int64."""
    return estimate_from_lengths(np.fromiter((len(t) for t in texts), np.int64, len(texts)), chars_per_token)


def estimate_from_lengths(lengths: np.ndarray, chars_per_token: float) -> np.ndarray:
    """`estimate_token_counts` from character counts (what the Ray engine holds): the same IEEE
    division and ceiling as math.ceil(len / chars_per_token), vectorized."""
    if not chars_per_token > 0:
        raise PipelineError(f"chars_per_token must be > 0, got {chars_per_token!r}; re-run calibration")
    return np.ceil(np.asarray(lengths, dtype=np.int64).astype(np.float64) / chars_per_token).astype(np.int64)


def _ids(docs: Sequence[Mapping] | Sequence[str] | pa.Array | pa.ChunkedArray) -> pa.Array:
    """The documents' ids as one Arrow string array (the Ray engine passes its id column as is: a
    million Python strings would be most of the driver's memory)."""
    if isinstance(docs, pa.ChunkedArray):
        return docs.combine_chunks()
    if isinstance(docs, pa.Array):
        return docs
    return pa.array([d if isinstance(d, str) else d["id"] for d in docs], pa.string())


def _id_rank(ids: pa.Array) -> np.ndarray:
    """Each id's position in sorted order (UTF-8 byte order = Python's code-point order); duplicate
    ids fail."""
    n = len(ids)
    order = pc.sort_indices(ids).to_numpy()
    srt = ids.take(order)
    if n > 1 and pc.any(pc.equal(srt.slice(1), srt.slice(0, n - 1))).as_py():
        raise PipelineError("selection: duplicate doc ids; dedupe/validate the pool first")
    id_rank = np.empty(n, dtype=np.int64)
    id_rank[order] = np.arange(n)
    return id_rank


def _take(ids: pa.Array, idx: Sequence[int] | np.ndarray) -> list[str]:
    return ids.take(pa.array(np.asarray(idx, dtype=np.int64))).to_pylist()


def rank(q: np.ndarray, id_rank: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """Indices sorted by score descending, then id ascending (``id_rank`` = position in sorted ids);
    int32 where they fit (one ranking per register is held through the whole rule)."""
    idx = np.arange(len(q)) if idx is None else np.asarray(idx)
    out = idx[np.lexsort((id_rank[idx], -q[idx]))]
    return out.astype(np.int32) if len(id_rank) < 2**31 else out


def _tokens(t: np.ndarray | None, n: int, what: str) -> np.ndarray:
    a = np.asarray(t)
    if a.shape != (n,) or a.dtype.kind not in "iu" or (a < 0).any():
        raise PipelineError(f"selection: {what} must be {n} non-negative integers (one per doc)")
    return a.astype(np.int64, copy=False)


def check_params(registers: Sequence[str], mode: str, overfill: float, reserve: float, budget: int,
                 weights: Mapping[str, float] | None) -> dict[str, float]:
    """Validate the rule's parameters; return the per-register weights (equal when none given)."""
    if not registers or len(set(registers)) != len(registers):
        raise PipelineError(f"curate.registers: got {list(registers)}; need a non-empty list of unique names")
    if mode not in MODES:
        raise PipelineError(f"curate.mode: unknown mode '{mode}'; use one of {', '.join(MODES)}")
    if isinstance(overfill, bool) or not isinstance(overfill, (int, float)) or not overfill > 0:
        raise PipelineError(f"curate.overfill: got {overfill!r}; must be > 0 (the research used 1.0-4.5)")
    if isinstance(reserve, bool) or not isinstance(reserve, (int, float)) or not reserve >= 0:
        raise PipelineError(f"curate.reserve: got {reserve!r}; must be >= 0 (a multiple of the budget)")
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget <= 0:
        raise PipelineError(f"curate.budget_tokens: got {budget!r}; must be a positive integer")
    if not weights:
        return {r: 1.0 / len(registers) for r in registers}
    unknown = sorted(set(weights) - set(registers))
    if unknown:
        raise PipelineError(f"curate.weights: unknown register(s) {unknown}; use names from {list(registers)}")
    if any(not w >= 0 for w in weights.values()) or abs(sum(weights.values()) - 1.0) > 1e-6:
        raise PipelineError(f"curate.weights: {dict(weights)} sum to {sum(weights.values()):.6g}; "
                            "need non-negative weights summing to 1")
    return {r: float(weights.get(r, 0.0)) for r in registers}


def own_lists(rankings: Sequence[np.ndarray], est: np.ndarray, depths: Sequence[float],
              n: int) -> tuple[list[list[int]], np.ndarray]:
    """First-come lists: register r walks its ranking, skips owned docs, stops at ``depths[r]`` est tokens."""
    owned = np.zeros(n, dtype=bool)
    lists: list[list[int]] = []
    for ranking, depth in zip(rankings, depths):
        lst, got = [], 0
        for i in ranking:
            if got >= depth:
                break
            if not owned[i]:
                owned[i] = True
                lst.append(int(i))
                got += int(est[i])
        lists.append(lst)
    return lists, owned


def _schedule(queues: Sequence[Sequence[int]], mode: str, quotas: Sequence[float], exact: np.ndarray,
              taken: set[int], load: list[float], skip_taken: bool):
    """Yield (doc, register, n_queues_still_open) in the mode's order until every queue is empty."""
    pos = [0] * len(queues)
    turn = 0
    while True:
        if skip_taken:
            for r, q in enumerate(queues):
                while pos[r] < len(q) and int(q[pos[r]]) in taken:
                    pos[r] += 1
        open_ = [r for r in range(len(queues)) if pos[r] < len(queues[r]) and quotas[r] > 0]
        if not open_:
            return
        if mode == "tokens":
            r = min(open_, key=lambda j: (load[j] / quotas[j], j))
        else:  # round-robin in register order, exhausted lists skipped
            r = min(open_, key=lambda j: ((j - turn) % len(queues), j))
            turn = (r + 1) % len(queues)
        i = int(queues[r][pos[r]])
        pos[r] += 1
        taken.add(i)
        load[r] += int(exact[i])
        yield i, r, len(open_)


def build_sequence(q: np.ndarray, valid: np.ndarray, est: np.ndarray, exact: np.ndarray, id_rank: np.ndarray,
                   budget: int, mode: str, overfill: float, w: Sequence[float],
                   reserve_tokens: float) -> tuple[list[tuple[int, int, str]], list]:
    """The ordered sequence of (doc, picking list, phase own|continuation|reserve) and the lists.

    The reserve phase stops at the first document whose cumulative exact tokens reach the budget and
    the lists' tokens plus ``reserve_tokens``: nothing after it is ever selected, and walking every
    remaining candidate held a tuple per pool document."""
    n = len(valid)
    elig = np.flatnonzero(valid)
    if mode == "pooled":
        rankings = [rank(q.sum(axis=1), id_rank, elig)]
        depths, quotas = [budget * overfill], [1.0]
    else:
        rankings = [rank(q[:, r], id_rank, elig) for r in range(q.shape[1])]
        quotas = [1.0] * q.shape[1] if mode == "docs" else [wr * budget for wr in w]
        depths = [budget * overfill / q.shape[1]] * q.shape[1] if mode == "docs" else \
            [wr * budget * overfill for wr in w]
    lists, _ = own_lists(rankings, est, depths, n)
    taken: set[int] = set()
    load = [0.0] * len(lists)
    n_open = sum(1 for lst, qq in zip(lists, quotas) if lst and qq > 0)
    seq = [(i, r, "own" if k == n_open else "continuation")
           for i, r, k in _schedule(lists, mode, quotas, exact, taken, load, skip_taken=False)]
    reserve_quotas = [max(qq, 1e-9) for qq in quotas]  # zero-weight registers may still hold the reserve
    total = int(sum(int(exact[i]) for i, _, _ in seq))
    target = max(budget, total + reserve_tokens) if reserve_tokens > 0 else budget
    for i, r, _ in _schedule(rankings, mode, reserve_quotas, exact, taken, load, True):
        if total >= target:
            break
        seq.append((i, r, "reserve"))
        total += int(exact[i])
    return seq, lists


def select(docs: Sequence[Mapping] | Sequence[str], scores: np.ndarray, token_counts: np.ndarray, budget: int,
           registers: Sequence[str], mode: str = "docs", overfill: float = 1.0, reserve: float = 0.5,
           weights: Mapping[str, float] | None = None, valid: np.ndarray | None = None,
           exact_tokens: np.ndarray | None = None) -> Selection:
    """The research's fill rule by ``mode`` (module docstring); ``token_counts`` are the estimates."""
    ids = _ids(docs)
    registers = list(registers)
    w = check_params(registers, mode, overfill, reserve, budget, weights)
    id_rank = _id_rank(ids)
    est = _tokens(token_counts, len(ids), "token_counts")
    exact = est if exact_tokens is None else _tokens(exact_tokens, len(ids), "exact_tokens")
    valid = np.ones(len(ids), dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
    q = quantize_scores(scores)
    if q.shape != (len(ids), len(registers)) or valid.shape != (len(ids),):
        raise PipelineError(f"selection: scores have shape {q.shape}, valid {valid.shape}; expected "
                            f"({len(ids)}, {len(registers)}) and ({len(ids)},); score the same filtered pool")
    available = int(exact[valid].sum())
    if available < budget:
        raise PipelineError(f"curate.budget_tokens: {budget} exceeds the {available} tokens of the "
                            f"{int(valid.sum())} eligible documents even with the reserve; lower "
                            "curate.budget_tokens or enlarge the pool")
    seq, lists = build_sequence(q, valid, est, exact, id_rank, budget, mode, overfill, [w[r] for r in registers],
                                reserve * budget)
    cum = np.cumsum([exact[i] for i, _, _ in seq])
    n_budget = int(np.searchsorted(cum, budget) + 1)
    n_lists = sum(ph != "reserve" for _, _, ph in seq)
    lists_tokens = int(cum[n_lists - 1]) if n_lists else 0
    reserve_end = min(int(np.searchsorted(cum, lists_tokens + reserve * budget) + 1), len(seq)) if reserve > 0 \
        else n_lists
    tail_end = max(n_budget, reserve_end) if reserve > 0 else n_budget
    stats = _stats(seq, lists, n_budget, tail_end, est, exact, q, registers, mode, budget, overfill, reserve, w)
    reserve_tokens = int(cum[tail_end - 1]) - lists_tokens if tail_end > n_lists else 0
    stats["reserve_tokens"] = reserve_tokens
    stats["reserve_short"] = bool(reserve_tokens < reserve * budget)
    index = np.array([i for i, _, _ in seq[:tail_end]], dtype=np.int64)
    return Selection(_take(ids, index), n_budget, stats, index=index)


def _stats(seq, lists, n_budget, tail_end, est, exact, q, registers, mode, budget, overfill, reserve, w) -> dict:
    """What the rule did, per picking list: the numbers the metrics show."""
    names = ["pooled"] if mode == "pooled" else registers
    chosen = seq[:n_budget]
    per = {}
    for r, name in enumerate(names):
        mine = [(i, ph) for i, rr, ph in chosen if rr == r]
        per[name] = {"docs": len(mine), "tokens": int(sum(exact[i] for i, _ in mine)),
                     "own_docs": sum(ph == "own" for _, ph in mine),
                     "continuation_docs": sum(ph == "continuation" for _, ph in mine),
                     "reserve_used_docs": sum(ph == "reserve" for _, ph in mine),
                     "list_docs": len(lists[r]), "list_depth_tokens": int(sum(est[i] for i in lists[r])),
                     "exhausted": sum(ph != "reserve" for _, ph in mine) == len(lists[r])}
    tail = seq[n_budget:tail_end]
    tail_tokens = int(sum(exact[i] for i, _, _ in tail))
    idx = np.array([i for i, _, _ in chosen], dtype=np.int64)
    home = q.argmax(axis=1)
    fallback_tokens = int(sum(exact[i] for i, _, ph in chosen if ph == "reserve"))
    n_tokens = int(exact[idx].sum())
    return {"mode": mode, "budget_tokens": int(budget), "overfill": float(overfill), "reserve": float(reserve),
            "weights": {r: round(w[r], 6) for r in registers} if mode == "tokens" else None,
            "n_docs": n_budget, "n_tokens": n_tokens, "n_tokens_est": int(est[idx].sum()),
            "fallback_docs": sum(ph == "reserve" for _, _, ph in chosen), "fallback_tokens": fallback_tokens,
            "fallback_share": round(fallback_tokens / n_tokens, 6) if n_tokens else 0.0,
            "tail_docs": len(tail), "tail_tokens": tail_tokens,
            "by_list": per, "argmax_mix": register_mix(idx, home, registers, exact)}


def register_mix(idx: Sequence[int], home: np.ndarray, registers: Sequence[str], tokens: np.ndarray) -> dict:
    """Docs and tokens per home (argmax) register for the given doc indices."""
    idx = np.asarray(idx, dtype=np.int64)
    return {r: {"docs": int((home[idx] == i).sum()), "tokens": int(tokens[idx][home[idx] == i].sum())}
            for i, r in enumerate(registers)}


def random_selection(docs: Sequence[Mapping] | Sequence[str], token_counts: np.ndarray, budget: int,
                     rng: np.random.Generator, reserve: float, scores: np.ndarray | None = None,
                     registers: Sequence[str] | None = None) -> Selection:
    """Uniform random baseline at the same budget: a seeded permutation, taken until the budget is met.

    ``token_counts`` should be exact (the real tokenizer), like the curated budget cut.
    Pass ``scores``/``registers`` to get the realised register mix (by argmax) in the stats.
    """
    ids = _ids(docs)
    tokens = _tokens(token_counts, len(ids), "token_counts")
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget <= 0:
        raise PipelineError(f"curate.budget_tokens: got {budget!r}; must be a positive integer")
    if int(tokens.sum()) < budget:
        raise PipelineError(f"curate.budget_tokens: {budget} exceeds the {int(tokens.sum())} tokens of the "
                            f"{len(ids)} documents; lower curate.budget_tokens or enlarge the pool")
    perm = rng.permutation(len(ids))
    cum = np.cumsum(tokens[perm])
    n_budget = int(np.searchsorted(cum, budget) + 1)
    tail_end = min(int(np.searchsorted(cum, cum[n_budget - 1] + reserve * budget) + 1), len(perm)) \
        if reserve > 0 else n_budget
    chosen = perm[:n_budget]
    tail_tokens = int(tokens[perm[n_budget:tail_end]].sum())
    stats: dict = {"mode": "random", "budget_tokens": int(budget), "reserve": float(reserve),
                   "n_docs": n_budget, "n_tokens": int(tokens[chosen].sum()), "fallback_docs": 0,
                   "tail_docs": tail_end - n_budget, "tail_tokens": tail_tokens,
                   "tail_short": bool(tail_tokens < reserve * budget)}
    if scores is not None and registers is not None:
        stats["argmax_mix"] = register_mix(chosen, quantize_scores(scores).argmax(axis=1), list(registers), tokens)
    return Selection(_take(ids, perm[:tail_end]), n_budget, stats, index=perm[:tail_end])

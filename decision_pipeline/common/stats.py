"""Evaluation statistics shared by the pipeline stages.

Pure functions over numpy arrays / sequences so every stage computes accuracy,
calibration, discrimination, agreement and uncertainty intervals the same way.
Probability/logit inputs may be *ragged* (questions with different numbers of
options): pass a 2-D array or a list of 1-D arrays. Bad input raises ValueError
with a one-line message.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

Rows = Union[np.ndarray, Sequence[Sequence[float]]]  # 2-D array or (ragged) list of 1-D rows

NLL_CLIP = 1e-12


# ---------------------------------------------------------------- helpers
def _vec(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


def _same_len(n1: int, n2: int, name1: str, name2: str) -> None:
    if n1 != n2:
        raise ValueError(f"length mismatch: {name1} has {n1} items but {name2} has {n2}")


def _nonempty(n: int, name: str) -> None:
    if n == 0:
        raise ValueError(f"{name} is empty; need at least one item")


def _pad(rows: Rows, fill: float, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Return (padded float matrix, validity mask) so ragged rows vectorise."""
    if isinstance(rows, np.ndarray) and rows.dtype != object:
        if rows.ndim != 2:
            raise ValueError(f"{name} must be 2-D or a list of 1-D rows, got shape {rows.shape}")
        mat = rows.astype(float)
        if mat.shape[1] == 0:
            raise ValueError(f"{name} has rows with no options")
        return mat, np.ones(mat.shape, dtype=bool)
    arrs = [np.asarray(r, dtype=float) for r in rows]
    for i, r in enumerate(arrs):
        if r.ndim != 1 or r.size == 0:
            raise ValueError(f"{name}[{i}] must be a non-empty 1-D row, got shape {r.shape}")
    width = max((r.size for r in arrs), default=1)
    mat = np.full((len(arrs), width), fill, dtype=float)
    mask = np.zeros((len(arrs), width), dtype=bool)
    for i, r in enumerate(arrs):
        mat[i, : r.size] = r
        mask[i, : r.size] = True
    return mat, mask


def _gold_index(gold: Any, mask: np.ndarray, rows_name: str) -> np.ndarray:
    g = _vec(gold, "gold")
    _same_len(mask.shape[0], g.size, rows_name, "gold")
    _nonempty(g.size, "gold")
    if g.dtype.kind not in "iu":
        if g.dtype.kind != "f" or not np.all(np.mod(g, 1) == 0):
            raise ValueError(f"gold must hold integer option indices, got dtype {g.dtype}")
        g = g.astype(int)
    lengths = mask.sum(axis=1)
    bad = np.flatnonzero((g < 0) | (g >= lengths))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"gold[{i}]={int(g[i])} is out of range for a row with {int(lengths[i])} options")
    return g


def _check_temperature(T: float) -> None:
    if not (math.isfinite(T) and T > 0):
        raise ValueError(f"temperature must be a finite positive number, got {T}")


# ------------------------------------------------------------ basic scores
def accuracy(pred: Any, gold: Any) -> float:
    """Fraction of items where pred equals gold (labels of any comparable type)."""
    p, g = _vec(pred, "pred"), _vec(gold, "gold")
    _same_len(p.size, g.size, "pred", "gold")
    _nonempty(p.size, "pred")
    return float(np.mean(p == g))


def nll(probs: Rows, gold: Any) -> float:
    """Mean -log p(gold); probabilities are clipped at 1e-12 so one zero can't give inf."""
    mat, mask = _pad(probs, 0.0, "probs")
    g = _gold_index(gold, mask, "probs")
    p_gold = mat[np.arange(g.size), g]
    return float(np.mean(-np.log(np.clip(p_gold, NLL_CLIP, None))))


def brier(probs: Rows, gold: Any) -> float:
    """Multiclass Brier score: sum over a row's options of (p_k - 1[k=gold])^2, mean over rows.

    This is Brier's original (1950) convention, NOT divided by the number of
    classes, so it lies in [0, 2] whatever the option count; for ragged rows each
    row sums over its own options only (padding contributes nothing).
    """
    mat, mask = _pad(probs, 0.0, "probs")
    g = _gold_index(gold, mask, "probs")
    onehot = np.zeros_like(mat)
    onehot[np.arange(g.size), g] = 1.0
    return float(np.mean(np.sum(((mat - onehot) * mask) ** 2, axis=1)))


def margin(probs: Rows) -> np.ndarray:
    """Top-1 minus top-2 probability per row (a cheap confidence signal).

    A row with a single option has margin equal to its only probability
    (the missing runner-up counts as 0).
    """
    mat, mask = _pad(probs, 0.0, "probs")
    mat = np.hstack([np.where(mask, mat, 0.0), np.zeros((mat.shape[0], 1))])  # runner-up >= 0
    top2 = -np.sort(-mat, axis=1)[:, :2]
    return top2[:, 0] - top2[:, 1]


# ------------------------------------------------------------ calibration
@dataclass(frozen=True)
class ReliabilityBins:
    """Per-bin data for a reliability diagram; empty bins have NaN means."""

    edges: np.ndarray  # n_bins + 1 bin edges on [0, 1]
    count: np.ndarray  # items per bin (int)
    mean_confidence: np.ndarray  # mean confidence per bin (NaN if empty)
    accuracy: np.ndarray  # fraction correct per bin (NaN if empty)

    def to_dict(self) -> dict[str, list]:
        """JSON-friendly form (NaN -> None) for metrics/plot files."""

        def clean(a: np.ndarray) -> list:
            return [None if math.isnan(v) else v for v in a.tolist()]

        return {"edges": self.edges.tolist(), "count": self.count.tolist(),
                "mean_confidence": clean(self.mean_confidence), "accuracy": clean(self.accuracy)}


def reliability_bins(confidence: Any, correct: Any, n_bins: int = 10) -> ReliabilityBins:
    """Bin items by confidence into equal-width bins [i/n, (i+1)/n); the last bin is closed at 1.0."""
    c, y = _vec(confidence, "confidence").astype(float), _vec(correct, "correct")
    _same_len(c.size, y.size, "confidence", "correct")
    _nonempty(c.size, "confidence")
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    if np.any((c < 0) | (c > 1)) or not np.all(np.isfinite(c)):
        raise ValueError("confidence values must lie in [0, 1]")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("correct must be binary (0/1 or bool)")
    y = y.astype(float)
    idx = np.minimum(np.floor(c * n_bins).astype(int), n_bins - 1)
    count = np.bincount(idx, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(idx, weights=c, minlength=n_bins) / count
        acc = np.bincount(idx, weights=y, minlength=n_bins) / count
    return ReliabilityBins(np.arange(n_bins + 1) / n_bins, count, mean_conf, acc)


def ece(confidence: Any, correct: Any, n_bins: int = 10) -> float:
    """Expected calibration error: sum over bins of (count/N) * |accuracy - mean confidence|."""
    rb = reliability_bins(confidence, correct, n_bins)
    filled = rb.count > 0
    weights = rb.count[filled] / rb.count.sum()
    return float(np.sum(weights * np.abs(rb.accuracy[filled] - rb.mean_confidence[filled])))


def ece_noise_floor(confidence: Any, n_bins: int = 10, draws: int = 200, seed: int = 0) -> dict[str, float]:
    """ECE a perfectly calibrated model with these confidences would show on this many items.

    Each draw marks an item correct with probability equal to its confidence
    (what calibration means), so the ECE left is pure sampling noise; an
    observed ECE inside this range cannot be told apart from calibrated.
    """
    c = _vec(confidence, "confidence")
    _nonempty(c.size, "confidence")
    rng = np.random.default_rng(seed)
    values = np.array([ece(c, rng.random(c.size) < c, n_bins) for _ in range(draws)])
    return {"mean": float(values.mean()), "p95": float(np.percentile(values, 95))}


# --------------------------------------------------------- discrimination
def auroc(scores: Any, labels: Any) -> float | None:
    """Area under the ROC curve via the Mann-Whitney rank formula (ties get average ranks).

    Returns None when only one class is present, since AUROC is then undefined.
    """
    s, y = _vec(scores, "scores").astype(float), _vec(labels, "labels")
    _same_len(s.size, y.size, "scores", "labels")
    _nonempty(s.size, "scores")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("labels must be binary (0/1 or bool)")
    pos = y.astype(bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    starts = np.cumsum(counts) - counts  # items strictly below each distinct value
    avg_rank = starts + (counts + 1) / 2.0  # 1-based average rank of a tie group
    rank_sum = float(avg_rank[inverse][pos].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


# -------------------------------------------------------------- agreement
def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable],
                labels: Sequence[Hashable] | None = None) -> float | None:
    """Cohen's kappa (po - pe) / (1 - pe) for two raters over categorical labels.

    Degenerate case (pe == 1, i.e. both raters used one and the same category):
    return 1.0 when observed agreement is 1 (always true with exact counts),
    otherwise None because kappa is 0/0 and undefined.
    """
    a_list, b_list = list(a), list(b)
    _same_len(len(a_list), len(b_list), "a", "b")
    _nonempty(len(a_list), "a")
    cats = list(dict.fromkeys(a_list + b_list)) if labels is None else list(dict.fromkeys(labels))
    index = {c: i for i, c in enumerate(cats)}
    unknown = [v for v in a_list + b_list if v not in index]
    if unknown:
        raise ValueError(f"rating {unknown[0]!r} is not in labels {cats!r}")
    k, n = len(cats), len(a_list)
    table = np.zeros((k, k), dtype=np.int64)
    np.add.at(table, ([index[v] for v in a_list], [index[v] for v in b_list]), 1)
    agree = int(np.trace(table))
    expected_num = int(table.sum(axis=1) @ table.sum(axis=0))  # pe * n^2, exact
    if expected_num == n * n:
        return 1.0 if agree == n else None
    po, pe = agree / n, expected_num / (n * n)
    return (po - pe) / (1.0 - pe)


# ------------------------------------------------------ temperature scaling
def softmax_with_temperature(logits: Rows, T: float = 1.0) -> np.ndarray | list[np.ndarray]:
    """Numerically stable softmax(logits / T) per row.

    An ndarray (1-D or 2-D) gives an ndarray of the same shape; a sequence of
    rows (possibly ragged) gives a list of 1-D arrays.
    """
    _check_temperature(T)
    if isinstance(logits, np.ndarray) and logits.dtype != object:
        z = logits.astype(float) / T
        if z.ndim not in (1, 2) or z.shape[-1] == 0:
            raise ValueError(f"logits must be a non-empty 1-D or 2-D array, got shape {z.shape}")
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)
    mat, mask = _pad(logits, -np.inf, "logits")
    probs = _softmax_padded(mat / T)
    return [probs[i, mask[i]] for i in range(mat.shape[0])]


def _softmax_padded(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)  # -inf padding stays -inf, exp -> 0
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _nll_at_temperature(mat: np.ndarray, g: np.ndarray, T: float) -> float:
    """Exact mean NLL of softmax(mat / T) via log-sum-exp (no clipping needed)."""
    z = mat / T
    m = z.max(axis=1)
    lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
    return float(np.mean(lse - z[np.arange(g.size), g]))


def fit_temperature(logits_list: Rows, gold: Any, lo: float = 0.05, hi: float = 20.0,
                    tol: float = 1e-6) -> float:
    """Single temperature T minimising NLL of softmax(logits / T) on held-out data.

    Golden-section search on log T over [lo, hi] until the log-T bracket is
    narrower than tol. NLL is convex in 1/T, hence unimodal in log T, so the
    search finds the global minimum inside the bounds; it is deterministic.
    """
    if not (0 < lo < hi) or tol <= 0:
        raise ValueError(f"need 0 < lo < hi and tol > 0, got lo={lo}, hi={hi}, tol={tol}")
    mat, mask = _pad(logits_list, -np.inf, "logits_list")
    g = _gold_index(gold, mask, "logits_list")

    def f(log_t: float) -> float:
        return _nll_at_temperature(mat, g, math.exp(log_t))

    inv_phi = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = math.log(lo), math.log(hi)
    c, d = b - inv_phi * (b - a), a + inv_phi * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tol:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - inv_phi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + inv_phi * (b - a)
            fd = f(d)
    return math.exp((a + b) / 2.0)


def temperature_lr_test(logits_list: Rows, gold: Any, T: float) -> float:
    """p-value of the likelihood-ratio test of temperature T against T = 1 (chi-square, 1 dof).

    Deviance 2·N·(NLL(1) − NLL(T)); a small p says the items really support
    rescaling, a large one says the fitted T mostly fits noise.
    """
    _check_temperature(T)
    mat, mask = _pad(logits_list, -np.inf, "logits_list")
    g = _gold_index(gold, mask, "logits_list")
    deviance = 2.0 * g.size * (_nll_at_temperature(mat, g, 1.0) - _nll_at_temperature(mat, g, T))
    if not math.isfinite(deviance):
        raise ValueError(f"likelihood-ratio deviance is not finite ({deviance}) at T={T}")
    return float(math.erfc(math.sqrt(max(deviance, 0.0) / 2.0)))


def fit_temperatures_by_group(logits_list: Rows, gold: Any, groups: Sequence[Hashable],
                              **fit_kwargs: float) -> dict[Hashable, float]:
    """One fitted temperature per group (e.g. question type), keyed in first-seen order."""
    rows = list(logits_list)
    g = _vec(gold, "gold")
    grp = list(groups)
    _same_len(len(rows), g.size, "logits_list", "gold")
    _same_len(len(rows), len(grp), "logits_list", "groups")
    _nonempty(len(rows), "logits_list")
    members: dict[Hashable, list[int]] = {}
    for i, key in enumerate(grp):
        members.setdefault(key, []).append(i)
    return {key: fit_temperature([rows[i] for i in idx], g[idx], **fit_kwargs)
            for key, idx in members.items()}


# ---------------------------------------------------------------- bootstrap
_AXIS_STATS: tuple[Callable[..., Any], ...] = (np.mean, np.median, np.sum)
_CHUNK_CELLS = 2_000_000  # bound memory of the (resamples x n) index block


def _check_bootstrap(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _resampled(n: int, n_resamples: int, seed: int,
               stat_of_rows: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Apply stat_of_rows to blocks of bootstrap index rows drawn from a private RNG."""
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_CELLS // n)
    out = []
    for start in range(0, n_resamples, chunk):
        idx = rng.integers(0, n, size=(min(chunk, n_resamples - start), n))
        out.append(np.asarray(stat_of_rows(idx), dtype=float))
    return np.concatenate(out)


def _interval(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_ci(values: Any, stat: Callable[[np.ndarray], Any] = np.mean,
                 n_resamples: int = 1000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float, float]:
    """Percentile bootstrap (point, low, high) for stat(values); seeded, no global RNG state."""
    v = _vec(values, "values")
    _nonempty(v.size, "values")
    _check_bootstrap(n_resamples, confidence)
    if stat in _AXIS_STATS:
        stats = _resampled(v.size, n_resamples, seed, lambda idx: stat(v[idx], axis=1))
    else:
        stats = _resampled(v.size, n_resamples, seed,
                           lambda idx: np.array([stat(v[row]) for row in idx], dtype=float))
    return (float(stat(v)), *_interval(stats, confidence))


def paired_bootstrap_diff(a: Any, b: Any, n_resamples: int = 1000, confidence: float = 0.95,
                          seed: int = 0) -> tuple[float, float, float]:
    """Bootstrap (diff, low, high) for mean(a) - mean(b), resampling the SAME items in both.

    Pairing removes between-item variance shared by the two systems, giving a
    much tighter interval than resampling a and b independently.
    """
    x, y = _vec(a, "a").astype(float), _vec(b, "b").astype(float)
    _same_len(x.size, y.size, "a", "b")
    _nonempty(x.size, "a")
    _check_bootstrap(n_resamples, confidence)
    stats = _resampled(x.size, n_resamples, seed,
                       lambda idx: x[idx].mean(axis=1) - y[idx].mean(axis=1))
    return (float(x.mean() - y.mean()), *_interval(stats, confidence))


def two_sample_bootstrap_diff(a: Any, b: Any, n_resamples: int = 1000, confidence: float = 0.95,
                              seed: int = 0) -> tuple[float, float, float]:
    """Bootstrap (diff, low, high) for mean(a) - mean(b) over two independent samples.

    Each side is resampled on its own (different units, e.g. the prompts of the first and the
    last quarter of an RL run, each used once): no pairing exists to exploit.
    """
    x, y = _vec(a, "a").astype(float), _vec(b, "b").astype(float)
    _nonempty(x.size, "a")
    _nonempty(y.size, "b")
    _check_bootstrap(n_resamples, confidence)
    rng = np.random.default_rng(seed)
    diffs = (x[rng.integers(0, x.size, (n_resamples, x.size))].mean(axis=1)
             - y[rng.integers(0, y.size, (n_resamples, y.size))].mean(axis=1))
    return (float(x.mean() - y.mean()), *_interval(diffs, confidence))

"""When a paired difference over seeds counts as detected.

Why: a bootstrap over 3 per-seed differences is just their min-max, yet it marked curated vs random
"detected" while the mean difference sat below the file's own 80%-power detectable difference.
The rule every comparison in `metrics/` now follows: the paired differences of n runs (seeds or
whole-chain reruns) give a mean, a t-interval (the bootstrap is too narrow for a handful of values)
and the 80%-power minimum detectable effect; "detected" needs n >= N_MIN paired runs, a 95% interval
that excludes 0 and a mean difference larger than the noise it is judged against. With fewer runs
the verdict is "not tested", never a verdict drawn from too little.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

N_MIN = 5
CONFIDENCE = 0.95


def _t(q: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(q, df))


def seed_verdict(diffs: Sequence[float], noise: float | None = None, noise_source: str = "sd of the differences",
                 n_min: int = N_MIN, digits: int = 4) -> dict:
    """The paired verdict of `diffs` (one difference per paired run).

    `noise` is what the difference must exceed (default: the SD of the differences themselves, i.e.
    how far one run's difference moves between runs). Returns n, diff, ci_low/ci_high (t-interval),
    sd, mde80, noise, noise_source, detected, verdict and reason."""
    d = [float(x) for x in diffs if x is not None and math.isfinite(float(x))]
    n = len(d)
    out: dict = {"n": n, "n_min": n_min, "per_run": [round(x, digits) for x in d]}
    if n == 0:
        return {**out, "diff": None, "ci_low": None, "ci_high": None, "sd": None, "mde80": None, "noise": noise,
                "noise_source": noise_source, "detected": False, "verdict": "not tested",
                "reason": "no paired runs"}
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if n > 1 else None
    lo = hi = mde = None
    if sd is not None:
        half = _t(0.5 + CONFIDENCE / 2, n - 1) * sd / math.sqrt(n)
        lo, hi = mean - half, mean + half
        mde = (_t(0.5 + CONFIDENCE / 2, n - 1) + _t(0.8, n - 1)) * sd / math.sqrt(n)
    noise = sd if noise is None else float(noise)
    rnd = (lambda v: None if v is None else round(v, digits))
    out.update(diff=rnd(mean), ci_low=rnd(lo), ci_high=rnd(hi), sd=rnd(sd), mde80=rnd(mde), noise=rnd(noise),
               noise_source=noise_source)
    if n < n_min:
        return {**out, "detected": False, "verdict": "not tested",
                "reason": f"{n} paired run(s), fewer than the {n_min} a verdict needs"}
    excludes = lo is not None and (lo > 0 or hi < 0)
    beyond = noise is not None and abs(mean) > noise
    detected = bool(excludes and beyond)
    reason = ("the 95% interval excludes 0 and the difference exceeds the noise" if detected else
              "the 95% interval includes 0" if not excludes else
              f"the difference {abs(mean):.{digits}g} does not exceed the noise {noise:.{digits}g}")
    return {**out, "detected": detected, "verdict": "detected" if detected else "not detected", "reason": reason}

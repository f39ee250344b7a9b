"""When a paired difference over seeds counts as detected.

Why: a bootstrap over 3 per-seed differences is just their min-max, yet it marked curated vs random
"detected" while the mean difference sat below the file's own 80%-power detectable difference.
The rule every comparison in `metrics/` now follows: the paired differences of n runs (seeds or
whole-chain reruns) give a mean, a t-interval (the bootstrap is too narrow for a handful of values)
and the 80%-power minimum detectable effect; "detected" needs n >= N_MIN paired runs, a 95% interval
that excludes 0 and a mean difference larger than the noise it is judged against. With fewer runs
the verdict is "not tested", never a verdict drawn from too little.

A family of comparisons judged together (the claims file's 13) is corrected for multiplicity: each
verdict carries its raw two-sided t-test p and, from `family_verdicts`, the Holm-adjusted p; the
family's verdict is on the adjusted p (family-wise error rate 5%). Why Holm and not
Benjamini-Hochberg: a "detected" in the README is read as a finding on its own, so the error to bound
is any false finding among the claims (FWER), not their expected share (FDR); Holm bounds it without
assuming the comparisons independent (they share runs) and is uniformly more powerful than Bonferroni.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

N_MIN = 5
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
POWER = 0.8


def t_quantile(q: float, df: int) -> float:
    """Student's t quantile (scipy imported on first use: the report imports this module)."""
    from scipy.stats import t

    return float(t.ppf(q, df))


_t = t_quantile


def _p_two_sided(t_stat: float, df: int) -> float:
    from scipy.stats import t

    return float(2 * t.sf(abs(t_stat), df))


def _sig(x: float | None, digits: int = 4) -> float | None:
    """`x` to `digits` significant digits (a p-value of 3e-7 must not round to 0)."""
    return None if x is None else float(f"{x:.{digits}g}")


def mde(sd: float | None, n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest mean paired difference a two-sided t-test at `alpha` over `n` runs detects with `power`
    (the normal-shift approximation with t quantiles at n - 1 degrees of freedom); None below 2 runs."""
    if sd is None or n < 2 or not math.isfinite(sd):
        return None
    return (_t(1 - alpha / 2, n - 1) + _t(power, n - 1)) * sd / math.sqrt(n)


def n_to_detect(diff: float | None, sd: float | None, alpha: float = ALPHA, power: float = POWER,
                n_max: int = 10_000, noise: float | None = None) -> int | None:
    """The smallest n whose two-sided t-test at `alpha` detects a mean paired difference `diff` with
    `power` (the normal-shift approximation with t quantiles at n - 1 degrees of freedom); None when
    there is no difference to detect (diff 0 or missing), it needs more than `n_max` runs, or `diff` does
    not exceed `noise` (the rule's second condition, which no number of runs changes)."""
    if diff is None or sd is None or diff == 0 or not math.isfinite(diff) or not math.isfinite(sd):
        return None
    if noise is not None and abs(diff) <= noise:
        return None
    if sd == 0:
        return 2
    for n in range(2, n_max + 1):
        if (_t(1 - alpha / 2, n - 1) + _t(power, n - 1)) * sd / math.sqrt(n) <= abs(diff):
            return n
    return None


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
        return {**out, "diff": None, "ci_low": None, "ci_high": None, "sd": None, "mde80": None, "p": None,
                "n_to_detect": None, "noise": noise,
                "noise_source": noise_source, "detected": False, "verdict": "not tested",
                "reason": "no paired runs"}
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if n > 1 else None
    lo = hi = size = p = None
    if sd is not None:
        half = _t(0.5 + CONFIDENCE / 2, n - 1) * sd / math.sqrt(n)
        lo, hi = mean - half, mean + half
        size = mde(sd, n)
        p = (1.0 if mean == 0 else 0.0) if sd == 0 else _p_two_sided(mean / (sd / math.sqrt(n)), n - 1)
    noise = sd if noise is None else float(noise)
    rnd = (lambda v: None if v is None else round(v, digits))
    out.update(diff=rnd(mean), ci_low=rnd(lo), ci_high=rnd(hi), sd=rnd(sd), mde80=rnd(size), p=_sig(p),
               n_to_detect=n_to_detect(mean, sd, noise=noise), noise=rnd(noise), noise_source=noise_source)
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


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values, in input order (None stays None and is not counted).

    With m p-values sorted ascending p(1) <= ... <= p(m), adjusted p(i) = max over j <= i of
    min(1, (m - j + 1) p(j)). Example: [0.01, 0.04, 0.03] -> [0.03, 0.06, 0.06]."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(present)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * float(p)))
        out[i] = running
    return out


def family_verdicts(verdicts: dict[str, dict], alpha: float = ALPHA) -> dict[str, dict]:
    """Each `seed_verdict` of a family judged together, re-judged on its Holm-adjusted p.

    Adds `p_adjusted`, `adjustment` ("holm over m") and `family_size`; "detected" needs, beside the
    per-comparison rule (n >= n_min, the difference beyond its noise), an adjusted p below `alpha`;
    the raw interval stays as the 95% CI. `n_to_detect` is recomputed at the Bonferroni level
    alpha / m (the most a Holm step asks), so it says how many runs would make the mean a finding
    of this family (None where the mean does not exceed its noise: no n makes that a finding), and
    `mde80_family` is the smallest mean this family's rule detects with 80% power at this n: the
    t-test's at alpha / m, or the noise when that is larger."""
    names = list(verdicts)
    adjusted = holm([verdicts[n].get("p") for n in names])
    m = sum(p is not None for p in adjusted)
    out = {}
    for name, p_adj in zip(names, adjusted):
        v = dict(verdicts[name])
        v.update(p_adjusted=_sig(p_adj), adjustment=f"holm over {m}", family_size=m)
        if v.get("diff") is not None and v.get("sd") is not None and m:
            v["n_to_detect"] = n_to_detect(v["diff"], v["sd"], alpha=alpha / m, noise=v.get("noise"))
        size = mde(v.get("sd"), int(v.get("n") or 0), alpha=alpha / m) if m else None
        if size is not None and v.get("noise") is not None:
            size = max(size, float(v["noise"]))
        v["mde80_family"] = None if size is None else round(size, 4)
        if v["verdict"] == "detected" and (p_adj is None or p_adj >= alpha):
            v.update(detected=False, verdict="not detected",
                     reason=f"the 95% interval excludes 0 (p {v['p']:.2g}) but not after correcting for the "
                            f"{m} comparisons judged together (Holm-adjusted p {p_adj:.2g} >= {alpha:g})")
        out[name] = v
    return out

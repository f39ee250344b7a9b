"""The claims file (`metrics/claims.json`): each comparison's verdict, and the prose that obeys it.

Why: "detected" must mean detected (issues 34, 50). A paired CI from one run that excludes zero is
not a finding when the difference is inside the whole-chain noise, and 13 comparisons judged at 95%
each give a false "detected" in about half of all studies with no effect: the claims file judges
each comparison over the whole-chain runs on its Holm-adjusted p (common/verdict.py). The report
and the README state a direction only for comparisons it calls detected, lead with the study's
mean and t-interval (this run's value is shown beside it, labelled), and say for every "not
detected" how large a mean this design detects and how many runs would detect the observed one.
Every verdict sentence is worded here, so the README, the report and the consistency test
(`reporting/docs/verdicts.py`) read one source.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.report.sources import Store

CLAIMS = "metrics/claims.json"
VERDICTS = ("detected", "not detected", "not tested")
WHOLE_CHAIN = "reseed"                      # the noise study's source the claims are paired over
SIGNS = {"+": 1.0, "-": -1.0, "\u2212": -1.0}
NUMBERS = ("diff", "ci_low", "ci_high", "sd", "noise", "mde80", "mde80_family")


@dataclass(frozen=True)
class Claim:
    """One comparison as the claims file judged it (a sum of signed metric terms, one value per run)."""
    name: str
    label: str
    metric: str
    terms: tuple[tuple[str, str, float], ...]      # (metrics file, key, sign)
    n: int
    per_run: tuple[float, ...]
    runs: tuple[str, ...]
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    sd: float | None
    noise: float | None
    noise_source: str
    mde80: float | None
    mde80_family: float | None
    p: float | None
    p_adjusted: float | None
    adjustment: str
    family_size: int
    n_to_detect: int | None
    verdict: str
    reason: str

    @property
    def detected(self) -> bool:
        return self.verdict == "detected"

    @property
    def this_run(self) -> float | None:
        """The committed run's own value (the study's baseline run), or None when it is not in the study."""
        return self.per_run[self.runs.index("baseline")] if "baseline" in self.runs else None


def parse_terms(metric: str, where: str) -> tuple[tuple[str, str, float], ...]:
    """'+metrics/a.json:k −metrics/b.json:j' -> ((file, key, +1), (file, key, -1))."""
    terms = []
    for token in metric.split():
        sign, body = SIGNS.get(token[0]), token[1:]
        file, _, key = body.partition(":")
        if sign is None or not file.endswith(".json") or not key:
            raise PipelineError(f"{where} holds {token!r}; expected signed terms like '+metrics/rl.json:reward_gain.diff'")
        terms.append((file, key, sign))
    if not terms:
        raise PipelineError(f"{where} is empty; name the metric terms of the comparison")
    return tuple(terms)


def _finite(where: str, value: object, nullable: bool) -> float | None:
    if value is None and nullable:
        return None
    try:
        finite = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:  # an integer past a float's range (10**400)
        finite = False
    if not finite:
        raise PipelineError(f"{where} is {str(value)[:40]}, expected a finite number" + (" or null" if nullable else ""))
    return float(value)


def _count(where: str, value: object, least: int, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise PipelineError(f"{where} is {value!r}, expected an integer >= {least}" + (" or null" if nullable else ""))
    return value


def check_claim(name: str, c: object, path: str = CLAIMS) -> Claim:
    """One comparison, every field present and typed (bad input: one line naming file and key)."""
    where = lambda k: f"{path}: key 'comparisons.{name}.{k}"  # noqa: E731
    if not isinstance(c, dict):
        raise PipelineError(f"{path}: key 'comparisons.{name}' is not a mapping")
    missing = [k for k in ("label", "metric", "n", "per_run", "runs", *NUMBERS, "p", "p_adjusted", "adjustment",
                           "family_size", "n_to_detect", "noise_source", "verdict", "detected", "reason") if k not in c]
    if missing:
        raise PipelineError(f"{where(missing[0])}' missing; rejudge the file (python -m decision_pipeline noise-study "
                            "--rejudge) or collect the study again")
    verdict = c["verdict"]
    if verdict not in VERDICTS:
        raise PipelineError(f"{where('verdict')}' is {verdict!r}, expected one of {', '.join(VERDICTS)}")
    if c["detected"] is not (verdict == "detected"):
        raise PipelineError(f"{where('detected')}' is {c['detected']!r} but its verdict is '{verdict}'")
    for key in ("label", "metric", "noise_source", "adjustment", "reason"):
        if not isinstance(c[key], str) or (key in ("label", "metric") and not c[key]):
            raise PipelineError(f"{where(key)}' is {c[key]!r}, expected text")
    n = _count(f"{where('n')}'", c["n"], 2)
    per_run, runs = c["per_run"], c["runs"]
    if not isinstance(per_run, list) or len(per_run) != n:
        raise PipelineError(f"{where('per_run')}' must list n = {n} values, one per whole-chain run")
    values = tuple(_finite(f"{where('per_run')}.{i}'", v, False) for i, v in enumerate(per_run))
    if not isinstance(runs, list) or len(runs) != n or not all(isinstance(r, str) for r in runs):
        raise PipelineError(f"{where('runs')}' must name the n = {n} runs behind per_run")
    nums = {k: _finite(f"{where(k)}'", c[k], nullable=k in ("mde80_family",)) for k in NUMBERS}
    p = {k: _finite(f"{where(k)}'", c[k], False) for k in ("p", "p_adjusted")}
    for k, v in p.items():
        if not 0 <= v <= 1:
            raise PipelineError(f"{where(k)}' is {v!r}, expected a p-value in [0, 1]")
    size = _count(f"{where('family_size')}'", c["family_size"], 1)
    n_det = _count(f"{where('n_to_detect')}'", c["n_to_detect"], 2, nullable=True)
    return Claim(name, c["label"], c["metric"], parse_terms(c["metric"], f"{where('metric')}'"), n, values,
                 tuple(runs), nums["diff"], nums["ci_low"], nums["ci_high"], nums["sd"], nums["noise"],
                 c["noise_source"], nums["mde80"], nums["mde80_family"], p["p"], p["p_adjusted"], c["adjustment"],
                 size, n_det, verdict, c["reason"])


def check_claims(data: object, path: str = CLAIMS) -> tuple[int, list[Claim]]:
    """(n_min, claims in file order) of a parsed claims file, or one line naming the file and key."""
    if not isinstance(data, dict) or not isinstance(data.get("comparisons"), dict) or not data["comparisons"]:
        raise PipelineError(f"{path}: key 'comparisons' missing, empty or not a mapping")
    if data.get("source") != WHOLE_CHAIN:
        raise PipelineError(f"{path}: key 'source' is {data.get('source')!r}; the claims are paired over the "
                            f"whole-chain reruns, source '{WHOLE_CHAIN}'")
    n_min = _count(f"{path}: key 'n_min'", data.get("n_min"), 2)
    claims = [check_claim(name, c, path) for name, c in data["comparisons"].items()]
    sizes = {c.family_size for c in claims}
    if len(sizes) != 1:
        raise PipelineError(f"{path}: key 'comparisons.*.family_size' differs between comparisons ({sorted(sizes)}); "
                            "one family is adjusted together: rejudge the file")
    return n_min, claims


def load_claims(store: Store) -> tuple[int | None, list[Claim]]:
    """(n_min, claims in file order); (None, []) when the file is absent."""
    if not store.exists(CLAIMS):
        return None, []
    return check_claims(store.json(CLAIMS))


def claim_for(claims: list[Claim], file: str, key: str) -> Claim | None:
    """The single-term claim whose metric is `file`:`key` (or a key under or above it: 'reward_gain' matches
    'reward_gain.diff'). A claim of several terms (SFT − base S1MB) is never the verdict of one key."""
    for c in claims:
        if len(c.terms) != 1 or c.terms[0][2] < 0:
            continue
        cf, ck, _ = c.terms[0]
        if cf == file and (ck == key or ck.startswith(key + ".") or key.startswith(ck + ".")):
            return c
    return None


# ------------------------------------------------------------------ the words of a verdict
def num(x: float | None, signed: bool = True) -> str:
    """A claim's number: 3 significant digits, ASCII minus (the PDF's base fonts lack U+2212)."""
    return "n/a" if x is None else format(x, "+.3g" if signed else ".3g")


def study(c: Claim) -> str:
    """'+0.0763 [-0.0239, +0.176]': the mean over the runs with its 95% t-interval."""
    return f"{num(c.diff)} [{num(c.ci_low)}, {num(c.ci_high)}]"


def family(c: Claim) -> str:
    """'Holm-adjusted p 0.43 (raw 0.11) across the 13 claims'."""
    return f"Holm-adjusted p {c.p_adjusted:.2g} (raw {c.p:.2g}) across the {c.family_size} claims"


def reach(c: Claim) -> str:
    """What a "not detected" would take: the smallest mean this design detects, and the runs for this one."""
    if c.diff is None or c.mde80_family is None:
        return ""
    size = f"the smallest mean the {c.n} runs detect (80% power, family level) is {num(c.mde80_family, False)}"
    if c.n_to_detect is not None:
        return f"{size}; about {c.n_to_detect} runs would detect a mean of {num(c.diff)}"
    if c.noise is not None and abs(c.diff) <= c.noise:
        return f"{size}; no number of runs detects {num(c.diff)}: it is inside its run-to-run SD {num(c.noise, False)}"
    return f"{size}; more runs than the study could plan would be needed to detect {num(c.diff)}"


def verdict_cell(verdict: str, p_adjusted: float | None) -> str:
    """'not detected (Holm p 0.43)': a verdict with the adjusted p it rests on (a table cell)."""
    return verdict if verdict == "not tested" or p_adjusted is None else f"{verdict} (Holm p {p_adjusted:.2g})"


def to_detect(c: Claim) -> str:
    """Short form of `reach` for a table cell: 'mde80 0.234; no n (inside SD 0.0955)' or 'mde80 3.15; ~13 runs'."""
    if c.detected or c.mde80_family is None or c.diff is None:
        return "\u2014"
    runs = (f"~{c.n_to_detect} runs" if c.n_to_detect is not None else
            f"no n (inside SD {num(c.noise, False)})" if c.noise is not None and abs(c.diff) <= c.noise else "no n")
    return f"mde80 {num(c.mde80_family, False)}; {runs}"


def statement(c: Claim, full: bool = True) -> str:
    """The one verdict sentence of a claim (README, report, docs read it): verdict, mean and interval,
    the adjusted p, and (`full`) for "not detected" what detection would take."""
    if c.verdict == "not tested":
        return f"not tested ({c.reason})"
    head = f"{c.verdict} over {c.n} whole-chain runs: mean {study(c)} (95% t-interval), {family(c)}"
    return head if c.detected or not full else f"{head}; {reach(c)}"


def guarded(sentence: str, claim: Claim | None, what: str, diff: float, lo: float, hi: float,
            spec: str = ".3f") -> str:
    """A paired comparison as the claims file allows it to be stated: the study's verdict and mean first,
    this run's value after it, labelled. Without a verdict, a within-run CI that excludes zero is given
    as numbers and said not to be judged against run-to-run noise yet (issue 34)."""
    ci = f"95% CI [{format(lo, spec)}, {format(hi, spec)}]"
    if claim is not None:
        return f"{what}: {statement(claim, full=False)}. This run alone: {diff:+{spec}} ({ci} within this run)."
    if lo > 0 or hi < 0:
        return (f"{what}: {diff:+{spec}} ({ci} within this run, excluding zero); not yet judged against "
                f"run-to-run noise (no verdict in metrics/claims.json), so not called a difference.")
    return sentence


def store_claims(store: Store) -> list[Claim]:
    """The claims of the store's run, read and checked once per build."""
    cached = getattr(store, "_claims", None)
    if cached is None:
        cached = load_claims(store)[1]
        store._claims = cached
    return cached

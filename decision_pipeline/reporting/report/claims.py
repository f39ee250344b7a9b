"""The claims file (`metrics/claims.json`): each comparison's verdict, and the prose that obeys it.

Why: "detected" must mean detected (issue 34): a paired CI from 3 seeds that
excludes zero is not a finding when the difference is inside the whole-chain
noise. When the claims file exists, the report states a direction ("higher by")
only for comparisons it calls detected, shows the others as numbers with the
verdict and its reason, and renders the file as the Claims table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.report.sources import Store

CLAIMS = "metrics/claims.json"
VERDICTS = ("detected", "not detected", "not tested")


@dataclass(frozen=True)
class Claim:
    """One comparison as the claims file judged it."""
    name: str
    label: str
    metric: str
    n: int | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    noise: float | None
    noise_source: str
    mde80: float | None
    verdict: str
    reason: str

    @property
    def detected(self) -> bool:
        return self.verdict == "detected"

    @property
    def file_key(self) -> tuple[str, str]:
        file, _, key = self.metric.partition(":")
        return file, key


def _num(where: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PipelineError(f"{where} is {value!r}, expected a finite number or null")
    return float(value)


def load_claims(store: Store) -> tuple[int | None, list[Claim]]:
    """(n_min, claims in file order); (None, []) when the file is absent. Bad entries: one line, file and key."""
    if not store.exists(CLAIMS):
        return None, []
    data = store.json(CLAIMS)
    comps = data.get("comparisons") if isinstance(data, dict) else None
    if not isinstance(comps, dict):
        raise PipelineError(f"{CLAIMS}: key 'comparisons' missing or not a mapping")
    n_min = data.get("n_min")
    out = []
    for name, c in comps.items():
        where = f"{CLAIMS}: key 'comparisons.{name}"
        if not isinstance(c, dict):
            raise PipelineError(f"{where}' is not a mapping")
        verdict = c.get("verdict")
        if verdict not in VERDICTS:
            raise PipelineError(f"{where}.verdict' is {verdict!r}, expected one of {', '.join(VERDICTS)}")
        if bool(c.get("detected")) != (verdict == "detected"):
            raise PipelineError(f"{where}.detected' is {c.get('detected')!r} but its verdict is '{verdict}'")
        for key in ("label", "metric"):
            if not isinstance(c.get(key), str) or not c[key]:
                raise PipelineError(f"{where}.{key}' missing; every comparison names its label and metric")
        n = c.get("n")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
            raise PipelineError(f"{where}.n' is {n!r}, expected an integer or null")
        out.append(Claim(name, c["label"], c["metric"], n,
                         *(_num(f"{where}.{k}'", c.get(k)) for k in ("diff", "ci_low", "ci_high", "noise")),
                         str(c.get("noise_source") or ""), _num(f"{where}.mde80'", c.get("mde80")),
                         verdict, str(c.get("reason") or "")))
    return (n_min if isinstance(n_min, int) else None), out


def claim_for(claims: list[Claim], file: str, key: str) -> Claim | None:
    """The claim whose metric is `file` and `key` (or a key under it: 'reward_gain' matches 'reward_gain.diff')."""
    for c in claims:
        cf, ck = c.file_key
        if cf == file and (ck == key or ck.startswith(key + ".") or key.startswith(ck + ".")):
            return c
    return None


def guarded(sentence: str, claim: Claim | None, what: str, diff: float, lo: float, hi: float,
            spec: str = ".3f") -> str:
    """A paired comparison as the claims file allows it to be stated.

    Only a comparison the claims file calls detected is stated with a direction ("higher by"). A CI that
    excludes zero within one run is not enough (issue 34): without a verdict the numbers are given and
    the sentence says the comparison is not yet judged against run-to-run noise.
    """
    ci = f"95% CI [{format(lo, spec)}, {format(hi, spec)}]"
    if claim is not None and claim.detected:
        return sentence + f" Detected in the claims file (n = {claim.n}, against {claim.noise_source} noise)."
    if claim is not None:
        why = f": {claim.reason}" if claim.reason else ""
        return f"{what}: {diff:+{spec}} ({ci}); {claim.verdict} in the claims file (n = {claim.n}){why}."
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

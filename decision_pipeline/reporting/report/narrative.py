"""Sentences generated from numbers, never claiming more than the interval supports.

Why: a report that says "better" where the CI includes zero misleads a reader
who only reads prose. Every comparison here goes through one of three rules:
a CI of the difference (claim only when it excludes zero), two CIs of the
arms (claim only when they do not overlap, and say that this is the test),
or a recorded noise half-width (claim only when the difference exceeds it).
Anything else is reported as a point estimate with "no CI recorded".
"""
from __future__ import annotations

import math


def fmt(value: float | None, spec: str = ".3f") -> str:
    """A number for prose and tables; None reads as 'n/a'; thousands get separators."""
    if value is None:
        return "n/a"
    if spec == "int":
        return f"{int(round(value)):,}"
    return format(value, spec)


def signed(value: float, spec: str = ".3f") -> str:
    return ("+" if value > 0 else "") + format(value, spec)  # ASCII minus: the PDF's base fonts lack U+2212


def interval(lo: float, hi: float, spec: str = ".3f") -> str:
    return f"[{format(lo, spec)}, {format(hi, spec)}]"


def diff_ci(what: str, diff: float, lo: float, hi: float, spec: str = ".3f",
            up: str = "higher", down: str = "lower") -> str:
    """Paired difference with its 95% CI: a direction is stated only when the CI excludes zero."""
    ci = f"95% CI {interval(lo, hi, spec)}"
    if lo > 0:
        return f"{what} is {up} by {format(abs(diff), spec)} ({ci}, which excludes zero)."
    if hi < 0:
        return f"{what} is {down} by {format(abs(diff), spec)} ({ci}, which excludes zero)."
    return f"{what}: no difference detected ({signed(diff, spec)}, {ci} includes zero)."


def arms_ci(what_a: str, a: tuple[float, float, float], what_b: str, b: tuple[float, float, float],
            spec: str = ".3f") -> str:
    """Two estimates with their own 95% CIs (no paired CI recorded): claim only without overlap."""
    (pa, la, ha), (pb, lb, hb) = a, b
    head = f"{what_a} {format(pa, spec)} {interval(la, ha, spec)} vs {what_b} {format(pb, spec)} {interval(lb, hb, spec)}"
    if la > hb:
        return f"{head}: {what_a} is higher (the 95% CIs do not overlap)."
    if ha < lb:
        return f"{head}: {what_a} is lower (the 95% CIs do not overlap)."
    return f"{head}: no difference detected (the 95% CIs overlap; no paired CI is recorded)."


def vs_noise(what: str, a: float, b: float, noise: float, spec: str = ".2f",
             lower_is: str = "lower", higher_is: str = "higher", noise_name: str = "noise half-range") -> str:
    """a vs b against a recorded noise half-width: a direction only when |a - b| exceeds it."""
    d = a - b
    head = f"{what}: {format(a, spec)} vs {format(b, spec)} (difference {signed(d, spec)}, {noise_name} \u00b1{format(noise, spec)})"
    if abs(d) <= noise or math.isclose(abs(d), noise):
        return f"{head}: no difference detected."
    return f"{head}: {lower_is if d < 0 else higher_is}, beyond the noise."


def vs_spread(what: str, a: tuple[float, float, float], b: tuple[float, float, float], spec: str = ".2f",
              lower_is: str = "lower", higher_is: str = "higher", runs: str = "seeds") -> str:
    """Two arms as (mean, min, max) over repeated runs: a direction only when the ranges do not overlap."""
    (ma, la, ha), (mb, lb, hb) = a, b
    head = (f"{what}: {format(ma, spec)} [{format(la, spec)}\u2013{format(ha, spec)}] vs {format(mb, spec)} "
            f"[{format(lb, spec)}\u2013{format(hb, spec)}] (mean [range] over {runs}; difference of means "
            f"{signed(ma - mb, spec)})")
    if ha < lb:
        return f"{head}: {lower_is}, the ranges do not overlap."
    if la > hb:
        return f"{head}: {higher_is}, the ranges do not overlap."
    return f"{head}: no difference detected (the ranges overlap)."


def point_only(what: str, a: float, b: float | None = None, what_b: str = "", spec: str = ".3f") -> str:
    """Point estimates where no CI or noise floor is recorded: say so instead of claiming."""
    if b is None:
        return f"{what} {format(a, spec)} (point estimate; no CI recorded)."
    return (f"{what} {format(a, spec)} vs {what_b} {format(b, spec)} "
            f"(point estimates; no CI or noise floor recorded, so no difference is claimed).")


def below_floor(what: str, value: float, floor: float, spec: str = ".3f", floor_name: str = "noise floor") -> str:
    """A value against a floor that a perfect model would reach by chance (e.g. ECE on n items)."""
    if value <= floor:
        return (f"{what} {format(value, spec)} is within the {floor_name} {format(floor, spec)}: "
                f"indistinguishable from perfect at this sample size.")
    return f"{what} {format(value, spec)} is above the {floor_name} {format(floor, spec)}."

"""What the report contains: the types of a section entry and how an entry is resolved.

Why a registry: adding a section (a new stage group) must be one entry — which
files activate it, which headline numbers it contributes (file, key, CI or noise
keys), which figures, and a narrative function — not an edit across the PDF
code. The entries themselves live in `sections.py`; this module holds the types,
the resolution of headline numbers and the page/image arithmetic the tests and
the PDF builder share.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from decision_pipeline.reporting.report.claims import Claim, claim_for, store_claims, verdict_cell
from decision_pipeline.reporting.report.noise import WITHIN_RUN, NoiseBook, study_interval
from decision_pipeline.reporting.report.noise import label as noise_label
from decision_pipeline.reporting.report.sources import Store


@dataclass(frozen=True)
class Headline:
    """One summary-table number: where it comes from and what bounds it.

    `key` may list alternatives (first present wins) for optional entries whose
    producer's schema is not fixed yet; `optional` entries drop their row when
    no alternative is present instead of failing. `lo`/`hi` are 95% CI keys in
    the same file; `noise` is a recorded half-width (±) and `floor` a level a
    perfect model reaches by chance; `noise_file` when that key lives elsewhere.
    """
    name: str
    label: str
    file: str
    key: str | tuple[str, ...]
    lo: str | None = None
    hi: str | None = None
    noise: str | None = None
    floor: str | None = None
    noise_file: str | None = None
    spec: str = ".3f"
    optional: bool = False
    nullable: bool = False
    within: str = ""                     # what a within-run `noise` varied, e.g. "pretrain seeds"
    within_n: str | None = None          # key of how many of them (same file)

    @property
    def noise_note(self) -> str:
        """Where a borrowed noise was measured (e.g. random selection's ppl judged by curated's repeat spread)."""
        return f" (measured on {Path(self.noise_file).stem})" if self.noise_file else ""

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.key,) if isinstance(self.key, str) else self.key


@dataclass(frozen=True)
class Fig:
    """A figure slot: drawn by `build(store, path)` into plots/report/<id>.png, or an existing PNG embedded."""
    id: str
    caption: str
    build: Callable[[Store, Path], Path] | None = None
    image: str | None = None


@dataclass(frozen=True)
class Section:
    """A stage group. Active when every path/glob in `requires` exists; skipped cleanly otherwise."""
    id: str
    title: str
    requires: tuple[str, ...]
    reads: tuple[str, ...]
    narrative: Callable[[Store], list[str]]
    headlines: tuple[Headline, ...] = ()
    figures: Callable[[Store], list[Fig]] = field(default=lambda store: [])
    key_sentences: int = 1            # how many of the narrative's first sentences page 1 shows


    def active(self, store: Store) -> bool:
        return all(store.exists(p) for p in self.requires)


@dataclass(frozen=True)
class Row:
    """A resolved headline: the numbers and the `file:key` they came from."""
    headline: Headline
    key: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    noise: float | None = None
    floor: float | None = None
    noise_source: str | None = None      # "reseed" (whole-chain) or "within-run"
    noise_n: int | None = None
    study_mean: float | None = None      # the mean over the noise study's whole-chain runs: the headline
    study_lo: float | None = None        # its 95% t-interval
    study_hi: float | None = None
    study_n: int | None = None
    claim: Claim | None = None           # the claims file's verdict when this number is one of its comparisons

    @property
    def source(self) -> str:
        return f"{self.headline.file}:{self.key}"

    @property
    def halfwidth(self) -> float | None:
        """The noise a change of this number is judged against: CI half-width, else noise, else floor."""
        if self.lo is not None and self.hi is not None:
            return (self.hi - self.lo) / 2
        return self.noise if self.noise is not None else self.floor

    def bound_text(self) -> str:
        """This run's uncertainty: its 95% CI, or the chance floor; a dash when the stage records neither."""
        s = self.headline.spec
        if self.lo is not None and self.hi is not None:
            return f"95% CI [{format(self.lo, s)}, {format(self.hi, s)}]"
        if self.floor is not None:
            return f"noise floor {format(self.floor, s)} (p95 of a calibrated model)"
        return "\u2014 (none recorded)"

    def study_text(self) -> str:
        """The headline: the mean over the whole-chain runs with its 95% t-interval, or a dash without a study."""
        if self.study_mean is None:
            return "\u2014 (no noise study)"
        s = self.headline.spec
        return f"{format(self.study_mean, s)} [{format(self.study_lo, s)}, {format(self.study_hi, s)}] ({self.study_n} runs)"

    def this_run_text(self) -> str:
        """This run's value with its own 95% CI (or chance floor), labelled as one run's."""
        value = "n/a" if self.value is None else format(self.value, self.headline.spec)
        bound = self.bound_text()
        return value if bound.startswith("\u2014") else f"{value}, {bound}"

    def verdict_text(self) -> str:
        """The claims file's verdict and Holm-adjusted p where this number is one of its comparisons."""
        return "\u2014" if self.claim is None else verdict_cell(self.claim.verdict, self.claim.p_adjusted)

    def noise_text(self) -> str:
        """Run-to-run noise with its source and run count, never unlabelled."""
        if self.noise is None or self.noise_source is None:
            return "\u2014 (not measured)"
        return noise_label(self.noise, self.noise_source, self.noise_n, self.headline.spec, self.headline.within) \
            + self.headline.noise_note


def resolve(store: Store, h: Headline, book: NoiseBook | None = None) -> Row | None:
    """Read a headline's numbers (errors name file and key); None for an absent optional entry.

    Noise: the whole-chain reseed SD from `book` when the noise study covers this key, else the
    headline's own within-run figure (labelled as such), else none. The study's mean and t-interval
    (the headline value where a study exists) come from the claims file when the number is one of its
    comparisons, else from the reseed spread (mean, SD, n).
    """
    if h.optional and not store.exists(h.file):
        return None
    key = next((k for k in h.keys if store.has(h.file, k)), None)
    if key is None:
        if h.optional:
            return None
        key = h.keys[0]                  # store.number raises the error naming file and key
    value = store.number(h.file, key, nullable=h.nullable)
    nfile = h.noise_file or h.file
    get = lambda rel, k: None if k is None else store.number(rel, k, nullable=h.nullable)  # noqa: E731
    whole = book.whole_chain(h.file, key) if book is not None else None
    if whole is not None:
        noise, source, n = whole.value, whole.source, whole.n
    elif h.noise is not None:
        noise, source = get(nfile, h.noise), WITHIN_RUN
        n = int(store.number(nfile, h.within_n)) if h.within_n and store.has(nfile, h.within_n) else None
    else:
        noise, source, n = None, None, None
    claim = claim_for(store_claims(store), h.file, key)
    study: dict = {}
    if claim is not None and claim.diff is not None:
        study = dict(study_mean=claim.diff, study_lo=claim.ci_low, study_hi=claim.ci_high, study_n=claim.n)
    elif whole is not None and whole.mean is not None and whole.n:
        lo, hi = study_interval(whole.mean, whole.value, whole.n)
        study = dict(study_mean=whole.mean, study_lo=lo, study_hi=hi, study_n=whole.n)
    if h.optional and any(k is not None and not store.has(h.file, k) for k in (h.lo, h.hi)):
        return Row(h, key, value, noise=noise, noise_source=source, noise_n=n, claim=claim, **study)
    return Row(h, key, value, get(h.file, h.lo), get(h.file, h.hi), noise, get(nfile, h.floor), source, n,
               claim=claim, **study)


def summary_entries(rows: list[Row]) -> dict[str, float | int | str | None]:
    """The flat `metrics/summary.json`: name (this run's value), name_ci_low/high, name_noise (+ _noise_source,
    _noise_n), name_noise_floor; where a noise study exists name_study_mean, _study_ci_low/high, _study_n
    (the headline); where the claims file judges the number name_claim, _verdict, _p, _p_adjusted.
    `_noise_source` is 'reseed' (whole-chain SD) or 'within-run' (half-range)."""
    out: dict[str, float | int | str | None] = {}
    for r in rows:
        n = r.headline.name
        out[n] = r.value
        if r.study_mean is not None:
            out.update({f"{n}_study_mean": round(r.study_mean, 6), f"{n}_study_ci_low": round(r.study_lo, 6),
                        f"{n}_study_ci_high": round(r.study_hi, 6), f"{n}_study_n": r.study_n})
        if r.claim is not None:
            out.update({f"{n}_claim": r.claim.name, f"{n}_verdict": r.claim.verdict, f"{n}_p": r.claim.p,
                        f"{n}_p_adjusted": r.claim.p_adjusted})
        for suffix, v in (("ci_low", r.lo), ("ci_high", r.hi), ("noise", r.noise), ("noise_floor", r.floor)):
            if v is not None:
                out[f"{n}_{suffix}"] = v
        if r.noise is not None and r.noise_source is not None:
            out[f"{n}_noise_source"] = r.noise_source
            if r.noise_n is not None:
                out[f"{n}_noise_n"] = r.noise_n
    return out


def halfwidth_from_summary(summary: dict, name: str) -> float | None:
    """Half-width recorded in a summary.json for headline `name` (same rule as `Row.halfwidth`)."""
    lo, hi = summary.get(f"{name}_ci_low"), summary.get(f"{name}_ci_high")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return (hi - lo) / 2
    for k in (f"{name}_noise", f"{name}_noise_floor"):
        v = summary.get(k)
        if isinstance(v, (int, float)) and math.isfinite(v):
            return float(v)
    return None


# ---------------------------------------------------------------- layout
SLOTS_PER_PAGE = 2        # a section's text block and each figure take half a page


def section_pages(n_figures: int) -> int:
    """A section starts on a new page; its text is one slot, each figure one slot."""
    return math.ceil((1 + n_figures) / SLOTS_PER_PAGE)


def expected_pages(figures_per_section: list[int], appendix_pages: int, claims_page: bool = False) -> int:
    """Title page + summary page (+ claims page) + sections + appendix: the PDF builder lays out exactly this."""
    return 2 + int(claims_page) + sum(section_pages(n) for n in figures_per_section) + appendix_pages

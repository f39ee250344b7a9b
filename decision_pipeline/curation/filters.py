"""Hygiene filters: small pure ``text -> (keep, reason)`` checks built from params.

Web pools carry cookie banners, pages of repeated lines, symbol/number junk and
near-empty pages; they waste token budget and skew register scores, so they go before
scoring. Each filter is a factory in ``FILTERS`` configured from params, e.g.::

    {"min_words": {"min": 50}, "alpha_ratio": {"min": 0.7},
     "repeated_lines": {"max_dup_line_frac": 0.3}, "boilerplate": {"patterns": [...]}}

Filters run in config order and the FIRST failing filter wins: ``apply_filters`` records,
per dropped document, the name of that filter (datatrove style), so drop counts per filter
sum to the number of dropped documents and depend on the order given in params (the funnel).
``counts_all`` charges each dropped document to EVERY filter it fails (order-free). Every
threshold comes from params (no code default to disagree with params.yaml); only the
boilerplate pattern list has a built-in default, which params does not set.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from decision_pipeline.common.errors import PipelineError

Check = Callable[[str], tuple[bool, str]]
_SPACE = re.compile(r"\s+")
_NON_ALPHA = re.compile(r"[\W\d_]+")  # removes everything except (unicode) letters

DEFAULT_BOILERPLATE = (
    r"we use cookies", r"accept (all )?cookies", r"privacy policy", r"all rights reserved",
    r"terms of (use|service)", r"subscribe to our newsletter", r"javascript is disabled",
    r"share on (facebook|twitter)", r"home \| about",
)


@dataclass(frozen=True)
class NamedFilter:
    """A configured filter: ``check(text)`` returns ``(keep, reason)``; reason is its name on drop."""

    name: str
    check: Check

    def __call__(self, text: str) -> tuple[bool, str]:
        return self.check(text)


def _num(name: str, key: str, v: object, lo: float, hi: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < lo or (hi is not None and v > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise PipelineError(f"filters.{name}.{key}: got {v!r}; must be a number in {rng}")
    return float(v)


def min_words(min: int) -> Check:  # noqa: A002 - param name mirrors the params key
    """Drop pages shorter than ``min`` whitespace words (stubs, error pages)."""
    lo = _num("min_words", "min", min, 0)
    return lambda text: (True, "") if len(text.split()) >= lo else (False, "min_words")


def max_words(max: int) -> Check:  # noqa: A002
    """Drop pathologically long pages (dumps, logs) that would eat the budget alone."""
    hi = _num("max_words", "max", max, 1)
    return lambda text: (True, "") if len(text.split()) <= hi else (False, "max_words")


def alpha_ratio(min: float) -> Check:  # noqa: A002
    """Drop symbol/number junk: share of alphabetic chars among non-space chars below ``min``."""
    lo = _num("alpha_ratio", "min", min, 0.0, 1.0)

    def check(text: str) -> tuple[bool, str]:
        chars = len(_SPACE.sub("", text))
        if chars == 0:
            return False, "alpha_ratio"
        alpha = len(_NON_ALPHA.sub("", text))
        return (True, "") if alpha / chars >= lo else (False, "alpha_ratio")

    return check


def repeated_lines(max_dup_line_frac: float) -> Check:
    """Drop pages whose non-empty lines are mostly repeats of earlier lines (spam, nav dumps)."""
    hi = _num("repeated_lines", "max_dup_line_frac", max_dup_line_frac, 0.0, 1.0)

    def check(text: str) -> tuple[bool, str]:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if len(lines) < 2:
            return True, ""
        dup = len(lines) - len(set(lines))
        return (True, "") if dup / len(lines) <= hi else (False, "repeated_lines")

    return check


def repeated_ngrams(n: int, max_dup_char_frac: float) -> Check:
    """Drop pages whose repeated word n-grams cover too many characters (Gopher-style repetition).

    A word is *covered* when it lies inside an n-gram occurrence whose n-gram already occurred
    earlier in the page; the score is covered word characters / all word characters. Catches
    spam that repeats phrases inside lines, which ``repeated_lines`` cannot see.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise PipelineError(f"filters.repeated_ngrams.n: got {n!r}; must be an integer >= 1")
    hi = _num("repeated_ngrams", "max_dup_char_frac", max_dup_char_frac, 0.0, 1.0)

    def check(text: str) -> tuple[bool, str]:
        return (True, "") if dup_ngram_char_frac(text, n) <= hi else (False, "repeated_ngrams")

    return check


def dup_ngram_char_frac(text: str, n: int) -> float:
    """Share of word characters inside repeated (not first) occurrences of word n-grams."""
    words = text.split()
    total = sum(len(w) for w in words)
    if total == 0 or len(words) < n:
        return 0.0
    seen: set[tuple[str, ...]] = set()
    covered = [False] * len(words)
    for i in range(len(words) - n + 1):
        g = tuple(words[i:i + n])
        if g in seen:
            covered[i:i + n] = [True] * n
        seen.add(g)
    return sum(len(w) for w, c in zip(words, covered) if c) / total


def boilerplate(max_hits: int, patterns: Sequence[str] = DEFAULT_BOILERPLATE) -> Check:
    """Drop pages matching more than ``max_hits`` distinct boilerplate regexes (case-insensitive)."""
    if isinstance(patterns, str) or not all(isinstance(p, str) for p in patterns):
        raise PipelineError("filters.boilerplate.patterns: must be a list of regex strings")
    compiled = []
    for p in patterns:
        try:
            compiled.append(re.compile(p, re.IGNORECASE))
        except re.error as e:
            raise PipelineError(f"filters.boilerplate.patterns: bad regex {p!r} ({e}); fix it") from None
    limit = _num("boilerplate", "max_hits", max_hits, 0)

    def check(text: str) -> tuple[bool, str]:
        hits = sum(1 for c in compiled if c.search(text))
        return (True, "") if hits <= limit else (False, "boilerplate")

    return check


FILTERS: dict[str, Callable[..., Check]] = {
    "min_words": min_words,
    "max_words": max_words,
    "alpha_ratio": alpha_ratio,
    "repeated_lines": repeated_lines,
    "repeated_ngrams": repeated_ngrams,
    "boilerplate": boilerplate,
}


def build_filters(config: Mapping[str, Mapping | None]) -> list[NamedFilter]:
    """Instantiate filters from ``{name: {param: value}}`` in config order."""
    if not isinstance(config, Mapping):
        raise PipelineError("filters: expected a mapping of filter name -> params")
    out = []
    for name, params in config.items():
        if name not in FILTERS:
            raise PipelineError(f"filters: unknown filter '{name}'; known filters: {', '.join(FILTERS)}")
        if params is not None and not isinstance(params, Mapping):
            raise PipelineError(f"filters.{name}: params must be a mapping, got {type(params).__name__}")
        try:
            check = FILTERS[name](**dict(params or {}))
        except TypeError as e:
            raise PipelineError(f"filters.{name}: bad parameter ({e}); see decision_pipeline/curation/filters.py") from None
        out.append(NamedFilter(name, check))
    return out


@dataclass(frozen=True)
class Filtered:
    """What ``apply_filters`` kept, and for every dropped document the filter that dropped it."""

    kept: list[dict]
    dropped_by: dict[str, str]   # document id -> name of the first filter it failed (input order)
    filter_names: tuple[str, ...]
    failed_all: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # id -> every failed filter

    @property
    def counts_all(self) -> dict[str, int]:
        """Drops per filter when each document is charged to EVERY filter it fails (order-free)."""
        counts = dict.fromkeys(self.filter_names, 0)
        for names in self.failed_all.values():
            for name in names:
                counts[name] += 1
        return counts

    @property
    def counts(self) -> dict[str, int]:
        """Drops per filter name, every configured filter listed (config order), zeros included."""
        counts = dict.fromkeys(self.filter_names, 0)
        for name in self.dropped_by.values():
            counts[name] += 1
        return counts


def apply_filters(docs: Sequence[Mapping], filters: Sequence[NamedFilter]) -> Filtered:
    """Keep docs passing every filter; a dropped doc is charged to the FIRST filter it fails (datatrove style)."""
    names = tuple(f.name for f in filters)
    if len(set(names)) != len(names):
        raise PipelineError(f"filters: a filter name occurs twice in {list(names)}; each filter runs once")
    kept, dropped_by, failed_all = [], {}, {}
    for doc in docs:
        text = doc.get("text")
        if not isinstance(text, str):
            raise PipelineError(f"filters: document '{doc.get('id')}' has non-string text; fix the pool")
        failed = tuple(f.name for f in filters if not f.check(text)[0])
        if not failed:
            kept.append(dict(doc))
            continue
        if doc["id"] in dropped_by:
            raise PipelineError(f"filters: duplicate document id '{doc['id']}'; ids must be unique")
        dropped_by[doc["id"]] = failed[0]
        failed_all[doc["id"]] = failed
    return Filtered(kept, dropped_by, names, failed_all)


def drop_unsafe(docs: Sequence[Mapping], max_score: int) -> tuple[list[dict], int]:
    """Drop docs whose ``safety_score`` (0 benign .. 5 unsafe) exceeds ``max_score``; missing = 0."""
    kept = [dict(d) for d in docs if int(d.get("safety_score") or 0) <= max_score]
    return kept, len(docs) - len(kept)

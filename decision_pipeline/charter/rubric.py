"""The rubric shared by human reviewers and the judge, and the verdict rule.

Why: humans and the judge must score the same way for their agreement (kappa) to
mean anything, so the rubric, the hard-check overrides and the verdict rule are
pure functions over plain dicts that the judge, the review store and the review UI
all import.

Scores are ``{voice: {dimension: int 1..5}}`` for both VOICES and all DIMENSIONS
(8 integers). Verdict: accept iff the mean of the eight is >= 4 AND no score is
<= 2 AND no reject-flag (wrong voice) is raised. Hard checks override judgement
before the rule is applied (see EFFECTS).
"""
from __future__ import annotations

from typing import Mapping

from decision_pipeline.common.errors import PipelineError

VOICES: tuple[str, ...] = ("first_person", "observer")
VOICE_LABELS: dict[str, str] = {"first_person": "First person", "observer": "Observer"}
VOICE_DOCS: dict[str, str] = {
    "first_person": "the model speaking as itself ('I ...'): how it reads the document and would respond",
    "observer": "a third-person note on the document (no 'I'): what in it matters and why",
}
DIMENSIONS: tuple[str, ...] = ("relevance", "specificity", "charter_grounding", "voice_tone")
DIMENSION_DOCS: dict[str, str] = {
    "relevance": "engages with what this document actually says (not a summary of it)",
    "specificity": "names concrete details of the document; concise",
    "charter_grounding": "cites the charter section that fits, as [X.Y]",
    "voice_tone": "stays in its voice; no formulaic opener, no talk about the task",
}
VERDICTS: tuple[str, ...] = ("accept", "reject")
SCORE_MIN, SCORE_MAX = 1, 5
ACCEPT_MEAN, REJECT_AT_OR_BELOW = 4, 2

# flag -> (dimension, kind, value): "floor" sets the score to value, "cap" limits it to
# value; dimension "*" means every dimension of the voice. Flags in REJECTS also force a
# reject verdict whatever the scores.
EFFECTS: dict[str, tuple[str, str, int]] = {
    "wrong_voice": ("voice_tone", "floor", 1),           # most frequent violation; also rejects
    "missing_voice": ("*", "floor", 1),                  # the voice is absent or empty; also rejects
    "uncited_harm": ("charter_grounding", "floor", 1),   # harmful document, no [X.Y] at all
    "summary": ("relevance", "cap", 3),                  # summarises instead of reflecting
    "formulaic_opener": ("voice_tone", "cap", 3),        # "This document ...", "In summary ..."
    "meta_language": ("charter_grounding", "cap", 3),    # names the charter / the task
}
REJECTS: frozenset[str] = frozenset({"wrong_voice", "missing_voice"})
# prompt failure modes: detected and recorded with every judge record (the improver reads
# them), but NOT hard checks -- the research's hard checks are exactly EFFECTS above; these
# leave the scores to judgement.
FAILURE_MODES: dict[str, str] = {
    "malformed_citation": "a citation not in [X.Y] form, or a section the charter lacks",
    "verbose": "over the word limit",
    "mentions_truncation": "talks about the text being cut off",
    "citation_gap": "on a benign document, the voice's analysis names a charter principle (a word of a section "
                    "title) but it cites none of the sections it names (checks.citation_gap)",
}
Scores = dict[str, dict[str, int]]
Flags = dict[str, list[str]]


def validate_scores(scores: object, where: str) -> Scores:
    """Return `scores` as a clean Scores dict or raise a one-line error naming `where`.

    Errors: not a mapping, a missing/unknown voice or dimension, a non-integer, or a
    value outside 1..5.
    """
    if not isinstance(scores, Mapping):
        raise PipelineError(f"{where}: scores must be an object {{voice: {{dimension: 1-5}}}}")
    unknown = sorted(set(scores) - set(VOICES))
    if unknown:
        raise PipelineError(f"{where}: unknown voice '{unknown[0]}'; voices are {', '.join(VOICES)}")
    out: Scores = {}
    for voice in VOICES:
        if voice not in scores:
            raise PipelineError(f"{where}: missing voice '{voice}'; score both voices ({', '.join(VOICES)})")
        dims = scores[voice]
        if not isinstance(dims, Mapping):
            raise PipelineError(f"{where}: scores.{voice} must be an object of dimension scores")
        extra = sorted(set(dims) - set(DIMENSIONS))
        if extra:
            raise PipelineError(f"{where}: unknown dimension '{voice}.{extra[0]}'; "
                                f"dimensions are {', '.join(DIMENSIONS)}")
        out[voice] = {}
        for dim in DIMENSIONS:
            if dim not in dims:
                raise PipelineError(f"{where}: missing score '{voice}.{dim}'")
            v = dims[dim]
            if isinstance(v, bool) or not isinstance(v, int):
                raise PipelineError(f"{where}: score '{voice}.{dim}' must be an integer 1-5, got {v!r}")
            if not SCORE_MIN <= v <= SCORE_MAX:
                raise PipelineError(f"{where}: score '{voice}.{dim}' = {v} is outside 1-5")
            out[voice][dim] = v
    return out


def flat(scores: Scores) -> list[int]:
    """The eight scores in (voice, dimension) order."""
    return [scores[v][d] for v in VOICES for d in DIMENSIONS]


def mean_score(scores: Scores) -> float:
    """Mean of the eight scores."""
    values = flat(scores)
    return sum(values) / len(values)


def apply_effects(scores: Scores, flags: Flags) -> Scores:
    """Scores after the hard-check floors and caps of EFFECTS (flags are per voice)."""
    out = {v: dict(scores[v]) for v in VOICES}
    for voice, names in flags.items():
        for name in names:
            if name in FAILURE_MODES:
                continue  # recorded, no effect on the scores
            if name not in EFFECTS:
                raise PipelineError(f"unknown hard-check flag '{name}'; known: "
                                    f"{', '.join([*EFFECTS, *FAILURE_MODES])}")
            dim, kind, value = EFFECTS[name]
            for d in (DIMENSIONS if dim == "*" else (dim,)):
                out[voice][d] = value if kind == "floor" else min(out[voice][d], value)
    return out


def forces_reject(flags: Flags) -> bool:
    """True when any flag floors straight to reject (wrong or missing voice)."""
    return any(n in REJECTS for names in flags.values() for n in names)


def verdict_rule(scores: Scores) -> str:
    """accept iff mean of the eight >= 4 (exact integer arithmetic) and no score <= 2."""
    values = flat(scores)
    ok = sum(values) >= ACCEPT_MEAN * len(values) and min(values) > REJECT_AT_OR_BELOW
    return "accept" if ok else "reject"


def verdict(scores: Scores, flags: Flags | None = None) -> tuple[str, Scores]:
    """The final (verdict, overridden scores): hard checks first, then the rule."""
    flags = flags or {}
    final = apply_effects(scores, flags)
    if forces_reject(flags):
        return "reject", final
    return verdict_rule(final), final


def judge_json_schema() -> dict:
    """Strict JSON schema for the judge's output: eight integer scores 1..5, nothing else."""
    dim_schema = {"type": "object", "additionalProperties": False, "required": list(DIMENSIONS),
                  "properties": {d: {"type": "integer", "minimum": SCORE_MIN, "maximum": SCORE_MAX}
                                 for d in DIMENSIONS}}
    return {"type": "object", "additionalProperties": False, "required": list(VOICES),
            "properties": {v: dim_schema for v in VOICES}}

"""In-memory records: cases, questions, options, targets, decisions, predictions.

These mirror the upstream case model (spec §3.2/§3.3). ``Decision`` is the flat
view the metrics need (one question of one case with its target); it is what
both the dataset reader and the ``metrics`` CLI produce.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from .definitions import TASKS
from .errors import S1MBError, show_ids

__all__ = [
    "Option", "Question", "Target", "Case", "Decision", "Prediction",
    "check_probabilities", "check_question", "parse_prediction",
]


@dataclass(frozen=True)
class Option:
    """One authored criterion; ``value`` is numeric for score questions."""

    id: str
    description: str = ""
    description_json: str | None = None
    value: float | None = None


@dataclass(frozen=True)
class Question:
    """One typed question; ``options`` keep the authored order (ties, fixed position)."""

    id: str
    task: str
    options: tuple[Option, ...]
    instructions: str = ""
    instructions_json: str | None = None
    system_prompt: str = ""

    @cached_property
    def option_ids(self) -> tuple[str, ...]:
        return tuple(o.id for o in self.options)


@dataclass(frozen=True)
class Target:
    """Target distribution for one question (``kind`` is the annotation kind)."""

    kind: str
    probabilities: dict[str, float]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """One dataset row after conversion: an input state and its questions and targets."""

    case_id: str
    questions: tuple[Question, ...]
    targets: dict[str, Target]
    group_id: str = ""
    language: str = ""
    state_json: str = "{}"
    input_hash: str = ""

    @property
    def state(self) -> Any:
        """The parsed model input state (kept as text so conversion stays cheap)."""
        return json.loads(self.state_json)


class Decision(NamedTuple):
    """A question flattened for scoring: option ids in authored order plus the target.

    A named tuple rather than a dataclass: tens of thousands are built per run.
    """

    case_id: str
    question_id: str
    options: tuple[str, ...]
    target: Mapping[str, float]
    values: tuple[float, ...] | None = None  # score only


@dataclass(frozen=True)
class Prediction:
    """A model's answer to one question: exactly one of ``probabilities`` and ``error``."""

    case_id: str
    question_id: str
    probabilities: dict[str, float] | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if (self.probabilities is None) == (self.error is None):
            raise S1MBError(
                "prediction needs exactly one of 'probabilities' and 'error'",
                case=self.case_id, question=self.question_id,
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id, "question_id": self.question_id,
            "probabilities": self.probabilities, "error": self.error,
        }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite(value: int | float) -> bool:
    """math.isfinite that calls an int beyond float range (JSON `1` followed by 400 zeros) not finite,
    where math.isfinite raises OverflowError."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_probabilities(
    probabilities: Any, option_ids: Sequence[str], what: str = "prediction", **where: Any
) -> None:
    """Raise unless keys equal the option ids, each p is finite in [0, 1] and |sum - 1| <= 1e-5."""
    if not isinstance(probabilities, Mapping):
        raise S1MBError(f"{what} probabilities must be an object, got {type(probabilities).__name__}", **where)
    if len(probabilities) != len(option_ids) or set(probabilities) != set(option_ids):
        raise S1MBError(
            f"{what} keys {show_ids(probabilities)} differ from option ids {show_ids(option_ids)}"
            + _difference(probabilities, option_ids),
            **where,
        )
    for key, p in probabilities.items():
        if not _is_number(p):
            raise S1MBError(f"{what} probability of {key!r} is {p!r}, not a number", **where)
        if not _is_finite(p):
            raise S1MBError(f"{what} probability of {key!r} is {_short(p)}, not finite", **where)
        if not 0 <= p <= 1:
            raise S1MBError(f"{what} probability of {key!r} is {p!r}, outside [0, 1]", **where)
    total = sum(probabilities.values())
    if not math.isclose(total, 1, abs_tol=1e-5):
        raise S1MBError(f"{what} probabilities sum to {total!r}, not within 1e-5 of 1", **where)


def _short(value: Any) -> str:
    """repr cut to a readable length (a 400-digit number is named, not printed)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _difference(keys: Any, option_ids: Sequence[str]) -> str:
    if len(option_ids) <= 8 and len(keys) <= 8:
        return ""
    missing = [o for o in option_ids if o not in keys]
    extra = [k for k in keys if k not in set(option_ids)]
    return f" (missing {show_ids(missing)}, unexpected {show_ids(extra)})"


def check_question(question: Question, /, **where: Any) -> None:
    """Question rules of §3.2: task known, >=2 unique options, noul false/true, score scale."""
    where = {**where, "question": question.id}
    if question.task not in TASKS:
        raise S1MBError(f"task {question.task!r} is not one of choice/noul/score", **where)
    ids = question.option_ids
    if len(ids) < 2:
        raise S1MBError(f"needs at least 2 options, got {len(ids)}", **where)
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise S1MBError(f"duplicate option ids {show_ids(dupes)}", **where)
    if question.task == "noul" and set(ids) != {"false", "true"}:
        raise S1MBError(f"noul option ids must be exactly 'false' and 'true', got {show_ids(ids)}", **where)
    values = [o.value for o in question.options]
    for option in question.options:
        value = option.value
        if value is not None and (not _is_number(value) or not _is_finite(value)):
            raise S1MBError(f"option {option.id!r} value {_short(value)} is not a finite number", **where)
    if question.task == "score":
        if any(v is None for v in values):
            missing = [o.id for o in question.options if o.value is None]
            raise S1MBError(f"score options {show_ids(missing)} have no numeric value", **where)
        if len(set(values)) < 2:
            raise S1MBError(f"score option values are all equal ({values[0]!r})", **where)


def parse_prediction(obj: Any, **where: Any) -> Prediction:
    """Validate the §3.3 JSON shape (no extra fields; exactly one of probabilities/error)."""
    if not isinstance(obj, Mapping):
        raise S1MBError(f"prediction must be an object, got {type(obj).__name__}", **where)
    allowed = {"case_id", "question_id", "probabilities", "error"}
    extra = sorted(set(obj) - allowed)
    if extra or "case_id" not in obj or "question_id" not in obj:
        raise S1MBError(f"prediction fields must be {sorted(allowed)} (case_id and question_id "
                        f"required); unexpected {extra}", **where)
    case_id, question_id = obj["case_id"], obj["question_id"]
    if not isinstance(case_id, str) or not isinstance(question_id, str):
        raise S1MBError("prediction case_id and question_id must be strings", **where)
    where = {**where, "case": case_id, "question": question_id}
    probabilities, error = obj.get("probabilities"), obj.get("error")
    if probabilities is not None:
        if not isinstance(probabilities, Mapping):
            raise S1MBError("prediction probabilities must be an object", **where)
        # Everything of §3.3 that needs no option list (keys are checked when scoring).
        check_probabilities(probabilities, list(probabilities), **where)
        probabilities = dict(probabilities)
    if error is not None and not isinstance(error, str):
        raise S1MBError("prediction error must be a string (the exception class name)", **where)
    if (probabilities is None) == (error is None):
        raise S1MBError("prediction needs exactly one of 'probabilities' and 'error'", **where)
    return Prediction(case_id, question_id, probabilities, error)

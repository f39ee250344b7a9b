"""Benchmark definitions and categories (spec §2) plus the fixed constants of S1MB.

A definition is a small metadata record; the cases live in the evaluation
dataset. Definitions are validated exactly like upstream (all fields required,
no extra fields, primary metric fixed by the task) because every result file
embeds a full copy and is compared against it.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import S1MBError
from .jsonio import dumps_strict, read_json

__all__ = [
    "TASKS", "PRIMARY_METRIC", "METRIC_KEYS", "EPSILON", "GENERALIZATION_PREFIX",
    "Benchmark", "Category", "safe_id", "parse_benchmark", "dump_benchmark",
    "load_benchmark", "load_benchmarks", "parse_category", "load_category",
    "generalization_subset",
]

TASKS: tuple[str, ...] = ("noul", "choice", "score")
EPSILON = 1e-12
GENERALIZATION_PREFIX = "datasets/s1mb-generalization-"
PRIMARY_METRIC: dict[str, str] = {
    "choice": "target_mass_at_prediction",
    "noul": "binary_brier",
    "score": "normalized_expected_score_mae",
}
#: The exact metric keys stored per task, in upstream order (spec §4.4).
METRIC_KEYS: dict[str, tuple[str, ...]] = {
    "noul": (
        "binary_brier", "accuracy", "positive_recall", "specificity", "precision",
        "balanced_accuracy", "f1", "true_positive", "false_positive", "false_negative",
        "true_negative", "positive_prevalence", "majority_accuracy_baseline",
        "constant_brier_baseline", "brier_skill", "baseline_adjusted_skill",
        "baseline_adjusted_score",
    ),
    "choice": (
        "target_mass_at_prediction", "uniform_accuracy_baseline",
        "fixed_answer_accuracy_baseline", "baseline_adjusted_skill", "baseline_adjusted_score",
    ),
    "score": (
        "normalized_expected_score_mae", "normalized_score_rmse", "constant_score_baseline",
        "constant_mae_baseline", "baseline_adjusted_skill", "baseline_adjusted_score",
    ),
}
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FIELDS = ("id", "task", "dataset", "split", "case_count", "decision_count", "primary_metric")


@dataclass(frozen=True)
class Benchmark:
    """One (subset x task x split) benchmark definition."""

    id: str
    task: str
    dataset: str
    split: str
    case_count: int
    decision_count: int
    primary_metric: str

    def to_dict(self) -> dict[str, Any]:
        """Plain dict in the upstream key order (for result files)."""
        return asdict(self)


@dataclass(frozen=True)
class Category:
    """A named list of benchmark ids (``english-v1`` is the leaderboard)."""

    id: str
    name: str
    description: str
    benchmarks: tuple[str, ...]


def safe_id(value: Any, what: str = "id") -> str:
    """Return ``value`` if it matches ``[A-Za-z0-9][A-Za-z0-9._-]*``, else raise."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise S1MBError(f"{what} {value!r} must match [A-Za-z0-9][A-Za-z0-9._-]*")
    return value


def _exact_keys(obj: Any, required: Sequence[str], what: str, **where: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise S1MBError(f"{what} must be a JSON object, got {type(obj).__name__}", **where)
    missing = [k for k in required if k not in obj]
    extra = [k for k in obj if k not in required]
    if missing or extra:
        raise S1MBError(f"{what} fields differ: missing {missing}, unexpected {extra}", **where)
    return obj


def _positive_int(value: Any, name: str, bid: str) -> int:
    if type(value) is not int or value <= 0:
        raise S1MBError(f"{name} must be an integer > 0, got {value!r}", benchmark=bid)
    return value


def parse_benchmark(obj: Any, name: str | None = None) -> Benchmark:
    """Validate a definition dict (§2); ``name`` is the file stem it must match."""
    bid = obj.get("id") if isinstance(obj, dict) else None
    where = {"benchmark": bid if isinstance(bid, str) else name}
    _exact_keys(obj, _FIELDS, "benchmark definition", **where)
    bid = safe_id(obj["id"], "benchmark id")
    if name is not None and bid != name:
        raise S1MBError(f"id differs from file name {name!r}", benchmark=bid)
    task = obj["task"]
    if task not in PRIMARY_METRIC:
        raise S1MBError(f"task {task!r} is not one of choice/noul/score", benchmark=bid)
    dataset = obj["dataset"]
    parts = PurePosixPath(dataset).parts if isinstance(dataset, str) else ()
    if len(parts) != 2 or parts[0] != "datasets" or parts[1] in (".", ".."):
        raise S1MBError(f"dataset {dataset!r} must be 'datasets/<subset>'", benchmark=bid)
    safe_id(parts[1], "dataset subset")
    if obj["split"] != "test":
        raise S1MBError(f"split {obj['split']!r} must be 'test'", benchmark=bid)
    if obj["primary_metric"] != PRIMARY_METRIC[task]:
        raise S1MBError(
            f"primary_metric {obj['primary_metric']!r} must be {PRIMARY_METRIC[task]!r} for {task}",
            benchmark=bid,
        )
    return Benchmark(
        id=bid, task=task, dataset=dataset, split="test",
        case_count=_positive_int(obj["case_count"], "case_count", bid),
        decision_count=_positive_int(obj["decision_count"], "decision_count", bid),
        primary_metric=obj["primary_metric"],
    )


def dump_benchmark(benchmark: Benchmark) -> str:
    """Canonical file text: 2-space JSON in field order plus a trailing newline."""
    return dumps_strict(benchmark.to_dict())


def load_benchmark(path: str | Path) -> Benchmark:
    """Read ``<id>.json`` and check the id equals the file name."""
    path = Path(path)
    try:
        return parse_benchmark(read_json(path), path.name.removesuffix(".json"))
    except S1MBError as err:
        raise S1MBError(err.located(), file=str(path)) from None


def load_benchmarks(directory: str | Path) -> dict[str, Benchmark]:
    """All ``*.json`` definitions of a directory, keyed by id."""
    paths = sorted(Path(directory).glob("*.json"))
    return {b.id: b for b in map(load_benchmark, paths)}


def parse_category(
    obj: Any, definitions: Mapping[str, Benchmark] | None = None, name: str | None = None
) -> Category:
    """Validate a category; ids must be unique and (if given) each must have a definition."""
    _exact_keys(obj, ("id", "name", "description", "benchmarks"), "category")
    cid = safe_id(obj["id"], "category id")
    if name is not None and cid != name:
        raise S1MBError(f"category id {cid!r} differs from file name {name!r}")
    if not isinstance(obj["name"], str) or not isinstance(obj["description"], str):
        raise S1MBError(f"category {cid!r}: name and description must be strings")
    ids = obj["benchmarks"]
    if not isinstance(ids, list) or not ids:
        raise S1MBError(f"category {cid!r}: benchmarks must be a non-empty list")
    for bid in ids:
        safe_id(bid, "benchmark id")
    if len(set(ids)) != len(ids):
        dupes = sorted({b for b in ids if ids.count(b) > 1})
        raise S1MBError(f"category {cid!r}: duplicate benchmark ids {dupes}")
    if definitions is not None:
        missing = [b for b in ids if b not in definitions]
        if missing:
            raise S1MBError(f"category {cid!r}: no definition for benchmarks {missing}")
    return Category(id=cid, name=obj["name"], description=obj["description"], benchmarks=tuple(ids))


def load_category(path: str | Path, definitions: Mapping[str, Benchmark] | None = None) -> Category:
    """Read ``categories/<id>.json``."""
    path = Path(path)
    try:
        return parse_category(read_json(path), definitions, path.name.removesuffix(".json"))
    except S1MBError as err:
        raise S1MBError(err.located(), file=str(path)) from None


def generalization_subset(
    benchmark_ids: Sequence[str], definitions: Mapping[str, Benchmark]
) -> list[str]:
    """Ids of the category whose dataset starts with ``datasets/s1mb-generalization-`` (§6)."""
    return [
        b for b in benchmark_ids
        if b in definitions and definitions[b].dataset.startswith(GENERALIZATION_PREFIX)
    ]

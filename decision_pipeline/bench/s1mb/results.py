"""Result files (§3.4): build, validate, read and write; published model folders.

A result is kept as the plain JSON dict upstream writes, so our own results and
imported published ones have the same shape. ``check_result`` validates the
schema (no extra fields, finite numbers); ``verify_result`` additionally
recomputes every metric from the predictions and the cases of the recorded
release; ``summarize_result`` applies the viewer's consistency check and gives
the ``BenchmarkScore`` that Task Avg and Borda use.
"""
from __future__ import annotations

import math
import platform
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .aggregate import BenchmarkScore, eligible
from .dataset import benchmark_decisions
from .definitions import METRIC_KEYS, Benchmark, parse_benchmark, safe_id
from .errors import S1MBError
from .jsonio import read_json, write_json
from .metrics import adjusted_score, score_decisions
from .records import Case, Prediction, parse_prediction

__all__ = [
    "EVALUATOR_VERSION", "build_result", "machine_environment", "check_result", "verify_result",
    "summarize_result", "read_result", "write_result", "check_params",
]

EVALUATOR_VERSION = "stages-s1mb-1"
_RESULT_FIELDS = (
    "format_version", "run_id", "benchmark", "model", "created_at", "evaluator_version",
    "provenance", "status", "counts", "metrics", "elapsed_seconds", "environment", "predictions",
)
_MODEL_FIELDS = ("id", "adapter", "revision", "settings", "total_params", "active_params", "parameter_count_method")
_COUNT_METHODS = ("non_lookup_parameters_v1", "embedding_excluded_parameters_v1")


def build_result(
    definition: Benchmark,
    cases: Sequence[Case],
    predictions: Sequence[Prediction],
    *,
    run_id: str,
    model: Mapping[str, Any],
    provenance: str = "measured",
    elapsed_seconds: float = 0.0,
    created_at: str | None = None,
    evaluator_version: str = EVALUATOR_VERSION,
    environment: Mapping[str, Any] | None = None,
    machine: bool = True,
) -> dict[str, Any]:
    """A §3.4 result dict for one run: counts, status, metrics and input hashes filled in.

    ``cases`` are the benchmark's cases (all of them, even under a ``--limit``);
    ``environment`` adds keys such as ``dataset_source`` to input_hashes and, with ``machine``
    (upstream's shape), python/platform. The pipeline passes ``machine=False``: its result files are
    DVC outputs, and a kernel or Python version in them changes their bytes (and dvc.lock) on every
    other machine; the stage keeps ``machine_environment()`` in its run-local timings file instead.
    """
    decisions = benchmark_decisions(definition, cases)
    preds = list(predictions)
    metrics = score_decisions(definition.task, decisions, preds, benchmark_id=definition.id)
    succeeded = sum(p.probabilities is not None for p in preds)
    env: dict[str, Any] = {
        **(machine_environment() if machine else {}),
        "input_hashes": {c.case_id: c.input_hash for c in cases if any(q.task == definition.task for q in c.questions)},
    }
    env.update(environment or {})
    result = {
        "format_version": 1,
        "run_id": run_id,
        "benchmark": definition.to_dict(),
        "model": _model_info(model),
        "created_at": created_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "evaluator_version": evaluator_version,
        "provenance": provenance,
        "status": "complete" if succeeded == len(decisions) else "partial",
        "counts": {"cases": len({p.case_id for p in preds}), "expected": definition.decision_count,
                   "succeeded": succeeded, "failed": len(preds) - succeeded},
        "metrics": metrics,
        "elapsed_seconds": elapsed_seconds,
        "environment": env,
        "predictions": [p.to_dict() for p in preds],
    }
    check_result(result)
    return result


def machine_environment() -> dict[str, str]:
    """What identifies the machine a result was computed on: the Python version and the platform string."""
    return {"python": platform.python_version(), "platform": platform.platform()}


def _model_info(model: Mapping[str, Any]) -> dict[str, Any]:
    """Upstream ``ModelInfo`` dump: optional fields present as defaults, upstream key order."""
    merged = {"settings": {}, "total_params": None, "active_params": None,
              "parameter_count_method": None, **dict(model)}
    ordered = {k: merged[k] for k in _MODEL_FIELDS if k in merged}
    return ordered | {k: v for k, v in merged.items() if k not in ordered}  # extras are rejected later


def _fail(detail: str, result: Any) -> S1MBError:
    bench = result.get("benchmark") if isinstance(result, dict) else None
    bid = bench.get("id") if isinstance(bench, dict) and isinstance(bench.get("id"), str) else None
    return S1MBError(f"result {detail}", benchmark=bid)


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_result(result: Any) -> dict[str, Any]:
    """Schema of §3.4 (upstream pydantic model, ``extra=forbid``); returns the result."""
    if not isinstance(result, dict):
        raise S1MBError(f"result must be a JSON object, got {type(result).__name__}")
    missing = [k for k in _RESULT_FIELDS if k not in result and k != "format_version"]
    extra = [k for k in result if k not in _RESULT_FIELDS]
    if missing or extra:
        raise _fail(f"fields differ: missing {missing}, unexpected {extra}", result)
    if result.get("format_version", 1) != 1 or type(result.get("format_version", 1)) is not int:
        raise _fail(f"format_version {result['format_version']!r} is not 1", result)
    try:
        safe_id(result["run_id"], "run_id")
        benchmark = parse_benchmark(result["benchmark"])
    except S1MBError as err:
        raise _fail(err.located(), result) from None
    _check_model(result)
    for key in ("created_at", "evaluator_version"):
        if not isinstance(result[key], str):
            raise _fail(f"{key} must be a string", result)
    if result["provenance"] not in ("measured", "demo"):
        raise _fail(f"provenance {result['provenance']!r} is not 'measured' or 'demo'", result)
    if result["status"] not in ("complete", "partial"):
        raise _fail(f"status {result['status']!r} is not 'complete' or 'partial'", result)
    counts = result["counts"]
    if not isinstance(counts, dict) or set(counts) != {"cases", "expected", "succeeded", "failed"} \
            or not all(_count(v) for v in counts.values()):
        raise _fail("counts must be {cases, expected, succeeded, failed} with integers >= 0", result)
    metrics = result["metrics"]
    if not isinstance(metrics, dict) or not all(v is None or _number(v) for v in metrics.values()):
        raise _fail("metrics must map names to finite numbers or null", result)
    if set(metrics) != set(METRIC_KEYS[benchmark.task]):
        raise _fail(f"metric keys {sorted(metrics)} differ from the {benchmark.task} keys "
                    f"{sorted(METRIC_KEYS[benchmark.task])}", result)
    if not _number(result["elapsed_seconds"]) or result["elapsed_seconds"] < 0:
        raise _fail("elapsed_seconds must be a finite number >= 0", result)
    if not isinstance(result["environment"], dict):
        raise _fail("environment must be an object", result)
    if not isinstance(result["predictions"], list):
        raise _fail("predictions must be a list", result)
    for item in result["predictions"]:
        try:
            parse_prediction(item)
        except S1MBError as err:
            raise err.at(benchmark=benchmark.id) from None
    return result


def _check_model(result: dict[str, Any]) -> None:
    model = result["model"]
    if not isinstance(model, dict) or not {"id", "adapter", "revision"} <= set(model) <= set(_MODEL_FIELDS):
        raise _fail(f"model must have id, adapter, revision and only {list(_MODEL_FIELDS)}", result)
    if not all(isinstance(model[k], str) for k in ("id", "adapter", "revision")):
        raise _fail("model id, adapter and revision must be strings", result)
    if not isinstance(model.get("settings", {}), dict):
        raise _fail("model settings must be an object", result)
    check_params(model, result)
    if model["adapter"] == "dummy" and result["provenance"] != "demo":
        raise _fail("dummy adapter results must have provenance 'demo'", result)


def check_params(obj: Mapping[str, Any], result: Any) -> None:
    """Parameter counts: ints >= 0, a known counting method, active <= total."""
    total, active, method = obj.get("total_params"), obj.get("active_params"), obj.get("parameter_count_method")
    if any(v is not None and not _count(v) for v in (total, active)):
        raise _fail("total_params and active_params must be integers >= 0 or null", result)
    if method is not None and method not in _COUNT_METHODS:
        raise _fail(f"parameter_count_method {method!r} is not one of {list(_COUNT_METHODS)}", result)
    if active is not None and (method is None or (total is not None and active > total)):
        raise _fail("active_params needs a parameter_count_method and must not exceed total_params", result)


def verify_result(result: Mapping[str, Any], cases: Iterable[Case], definition: Benchmark | None = None) -> None:
    """Full upstream validation: hashes, ids, counts, status and metrics recomputed to 1e-8.

    ``cases`` come from the dataset release recorded in the result. With
    ``definition`` (the current one) id/task/dataset/split/primary_metric must match.
    """
    check_result(result)
    recorded = parse_benchmark(result["benchmark"])
    if definition is not None:
        _check_compatible(recorded, definition)
    cases = list(cases)
    decisions = benchmark_decisions(recorded, cases)
    kept = {d.case_id for d in decisions}
    hashes = {c.case_id: c.input_hash for c in cases if c.case_id in kept}
    if result["environment"].get("input_hashes") != hashes:
        raise _fail("environment.input_hashes differ from the dataset's input hashes", result)
    preds = [parse_prediction(p, benchmark=recorded.id) for p in result["predictions"]]
    # Scoring also rejects unknown or duplicate ids and invalid probabilities.
    metrics = score_decisions(recorded.task, decisions, preds, benchmark_id=recorded.id)
    succeeded = sum(p.probabilities is not None for p in preds)
    counts = {"cases": len({p.case_id for p in preds}), "expected": len(decisions),
              "succeeded": succeeded, "failed": len(preds) - succeeded}
    if result["counts"] != counts:
        raise _fail(f"counts {result['counts']} do not match the predictions {counts}", result)
    complete = succeeded == len(decisions)
    if (result["status"] == "complete") != complete:
        raise _fail(f"status {result['status']!r} is inconsistent with the predictions", result)
    for key, value in metrics.items():
        stored = result["metrics"][key]
        if (value is None) != (stored is None) or (value is not None and abs(value - stored) > 1e-8):
            raise _fail(f"stored metric {key}={stored!r} differs from recomputed {value!r}", result)


def _check_compatible(recorded: Benchmark, current: Benchmark) -> None:
    for key in ("id", "task", "dataset", "split", "primary_metric"):
        if getattr(recorded, key) != getattr(current, key):
            raise S1MBError(f"result {key} {getattr(recorded, key)!r} differs from the current "
                            f"definition {getattr(current, key)!r}", benchmark=current.id)


def summarize_result(result: Mapping[str, Any], definition: Benchmark | None = None) -> BenchmarkScore:
    """Viewer ``summarize``: consistency checks, per-result eligibility, the ``BenchmarkScore``."""
    check_result(result)
    bench = parse_benchmark(result["benchmark"])
    if definition is not None:
        _check_compatible(bench, definition)
    m, c = result["metrics"], result["counts"]

    def bounded(key: str) -> float | None:
        value = m[key]
        if value is not None and not 0 <= value <= 1:
            raise _fail(f"metric {key}={value!r} is outside [0, 1]", result)
        return value

    primary, adjusted = bounded(bench.primary_metric), bounded("baseline_adjusted_score")
    if c["expected"] != bench.decision_count or c["cases"] > bench.case_count \
            or c["succeeded"] + c["failed"] > c["expected"] or (c["succeeded"] == 0) != (primary is None):
        raise _fail(f"counts {c} are inconsistent with the definition or the primary metric", result)
    complete = c["failed"] == 0 and c["succeeded"] == c["expected"] and c["cases"] == bench.case_count
    if (result["status"] == "complete") != complete:
        raise _fail(f"status {result['status']!r} is inconsistent with counts {c}", result)
    try:
        ok = eligible(bench.task, m)
    except S1MBError as err:
        raise _fail(err.detail, result) from None
    if bench.task == "noul":
        bounded("positive_prevalence")
        balanced = bounded("balanced_accuracy")
        skill = None if balanced is None else 2 * balanced - 1
    else:
        baseline = bounded(_baseline_key(bench.task))
        if not ok or primary is None:
            skill = None
        elif bench.task == "choice":
            skill = (primary - baseline) / (1 - baseline)  # type: ignore[operator]
        else:
            skill = 1 - primary / baseline  # type: ignore[operator]
    expected = adjusted_score(skill)
    if adjusted is None or expected is None:
        consistent = adjusted is None and expected is None
    else:
        consistent = abs(adjusted - expected) <= 1e-8
    if not consistent:
        raise _fail(f"baseline_adjusted_score {adjusted!r} is inconsistent with the stored metrics "
                    f"({expected!r})", result)
    return BenchmarkScore(
        task=bench.task, adjusted=adjusted, eligible=ok,
        complete=result["status"] == "complete" and result["provenance"] == "measured",
        demo=result["provenance"] == "demo",
    )


def _baseline_key(task: str) -> str:
    return "fixed_answer_accuracy_baseline" if task == "choice" else "constant_mae_baseline"


def read_result(path: str | Path) -> dict[str, Any]:
    """Read a ``.json``/``.json.xz`` result strictly and check its schema."""
    data = read_json(path)
    try:
        return check_result(data)
    except S1MBError as err:
        raise S1MBError(err.located(), file=str(path)) from None


def write_result(path: str | Path, result: Mapping[str, Any]) -> Path:
    """Check the schema, then write strictly (no NaN/Inf) and atomically."""
    check_result(dict(result))
    return write_json(path, dict(result))

"""Command line: ``python -m decision_pipeline.bench.s1mb {metrics,aggregate} FILE``.

``metrics FILE.jsonl``   one judgment per line -> ``{benchmark: {metric: value}}``
``aggregate FILE.json``  ``{model: {benchmark: {task, adjusted, eligible?, complete?}}}``
                         -> ``{model: {task_avg, task_scores, borda}}`` (0-1 scale)

Bad input prints one line (``FILE:LINE: what is wrong``) on stderr and exits 2.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .aggregate import BenchmarkScore, leaderboard
from .definitions import TASKS, safe_id
from .errors import S1MBError
from .jsonio import dumps_strict, loads_strict, read_json
from .metrics import score_decisions
from .records import Decision, Option, Prediction, Question, check_probabilities, check_question

__all__ = ["main", "metrics_from_jsonl", "aggregate_table"]

_JUDGMENT_FIELDS = ("benchmark", "task", "case_id", "question_id", "options", "target", "prediction")
_ENTRY_FIELDS = ("task", "adjusted", "eligible", "complete")


class InputError(Exception):
    """A located bad-input message, already worded as ``FILE[:LINE]: problem``."""


@dataclass
class _Group:
    task: str
    decisions: list[Decision] = field(default_factory=list)
    predictions: list[Prediction] = field(default_factory=list)


def _judgment(obj: Any) -> tuple[str, str, Decision, Prediction]:
    """Validate one JSONL line; returns (benchmark, task, decision, prediction)."""
    if not isinstance(obj, dict):
        raise S1MBError(f"line must be a JSON object, got {type(obj).__name__}")
    missing = [k for k in _JUDGMENT_FIELDS if k not in obj]
    extra = [k for k in obj if k not in _JUDGMENT_FIELDS]
    if missing or extra:
        raise S1MBError(f"fields differ: missing {missing}, unexpected {extra}")
    bid = safe_id(obj["benchmark"], "benchmark id")
    case_id, question_id = obj["case_id"], obj["question_id"]
    if not isinstance(case_id, str) or not isinstance(question_id, str):
        raise S1MBError("case_id and question_id must be strings", benchmark=bid)
    where = {"benchmark": bid, "case": case_id, "question": question_id}
    task = obj["task"]
    if task not in TASKS:
        raise S1MBError(f"unknown task {task!r} (expected noul, choice or score)", **where)
    raw = obj["options"]
    if not isinstance(raw, list) or not all(
        isinstance(o, dict) and isinstance(o.get("id"), str) and set(o) <= {"id", "value"} for o in raw
    ):
        raise S1MBError('options must be a list of {"id": str, "value"?: number}', **where)
    question = Question(question_id, task, tuple(Option(o["id"], value=o.get("value")) for o in raw))
    check_question(question, **where)
    ids = question.option_ids
    check_probabilities(obj["target"], ids, "target", **where)
    values = tuple(float(o.value) for o in question.options) if task == "score" else None  # type: ignore[arg-type]
    decision = Decision(case_id, question_id, ids, dict(obj["target"]), values)
    if obj["prediction"] is None:
        return bid, task, decision, Prediction(case_id, question_id, error="null")
    check_probabilities(obj["prediction"], ids, "prediction", **where)
    return bid, task, decision, Prediction(case_id, question_id, dict(obj["prediction"]))


def metrics_from_jsonl(path: str | Path) -> dict[str, dict[str, float | None]]:
    """Score every benchmark of a judgments file (D = all its lines of that benchmark)."""
    groups: dict[str, _Group] = {}
    seen: set[tuple[str, str, str]] = set()
    try:
        stream = open(path, encoding="utf-8")
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    with stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                bid, task, decision, prediction = _judgment(loads_strict(line))
                key = (bid, decision.case_id, decision.question_id)
                if key in seen:
                    raise S1MBError("duplicate judgment (same benchmark, case_id and question_id)",
                                    benchmark=bid, case=key[1], question=key[2])
                seen.add(key)
                group = groups.setdefault(bid, _Group(task))
                if group.task != task:
                    raise S1MBError(f"task {task!r} differs from {group.task!r} on earlier lines", benchmark=bid)
            except ValueError as err:
                raise InputError(f"{path}:{number}: {err}") from None
            except S1MBError as err:
                raise InputError(f"{path}:{number}: {err.located()}") from None
            group.decisions.append(decision)
            group.predictions.append(prediction)
    if not groups:
        raise InputError(f"{path}: no judgments found")
    try:
        return {bid: score_decisions(g.task, g.decisions, g.predictions, bid) for bid, g in groups.items()}
    except S1MBError as err:
        raise InputError(f"{path}: {err.located()}") from None


def _entry(value: Any, model: str, bid: str) -> BenchmarkScore:
    where = f"model {model!r} benchmark {bid!r}"
    if not isinstance(value, dict) or "task" not in value or "adjusted" not in value \
            or not set(value) <= set(_ENTRY_FIELDS):
        raise S1MBError(f"{where}: entry must be an object with task, adjusted and optional eligible, complete")
    task, adjusted = value["task"], value["adjusted"]
    if task not in TASKS:
        raise S1MBError(f"{where}: unknown task {task!r}")
    if adjusted is not None and (isinstance(adjusted, bool) or not isinstance(adjusted, (int, float))
                                 or not 0 <= adjusted <= 1):
        raise S1MBError(f"{where}: adjusted must be a number in [0, 1] or null, got {adjusted!r}")
    flags = {k: value.get(k, True) for k in ("eligible", "complete")}
    for key, flag in flags.items():
        if not isinstance(flag, bool):
            raise S1MBError(f"{where}: {key} must be true or false, got {flag!r}")
    return BenchmarkScore(task, None if adjusted is None else float(adjusted), **flags)


def aggregate_table(path: str | Path) -> dict[str, dict[str, Any]]:
    """Task scores, Task Avg and Borda for a table of adjusted scores (C = all benchmark ids in it)."""
    try:
        table = read_json(path)
    except S1MBError as err:
        raise InputError(f"{path}: {err.detail}") from None
    try:
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise S1MBError("expected {model: {benchmark_id: {task, adjusted, ...}}}")
        models = {m: {b: _entry(v, m, b) for b, v in row.items()} for m, row in table.items()}
        category: dict[str, str | None] = {}
        for m, row in models.items():
            for b, score in row.items():
                if category.setdefault(b, score.task) != score.task:
                    raise S1MBError(f"model {m!r} benchmark {b!r}: task {score.task!r} differs from "
                                    f"{category[b]!r} given for another model")
    except S1MBError as err:
        raise InputError(f"{path}: {err.located()}") from None
    return leaderboard(models, category)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m decision_pipeline.bench.s1mb", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    metrics = commands.add_parser("metrics", help="per-benchmark metrics from a judgments JSONL file")
    metrics.add_argument("file", type=Path)
    aggregate = commands.add_parser("aggregate", help="task scores, Task Avg and Borda from a JSON table")
    aggregate.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    try:
        out = metrics_from_jsonl(args.file) if args.command == "metrics" else aggregate_table(args.file)
    except InputError as err:
        print(str(err), file=sys.stderr)
        return 2
    sys.stdout.write(dumps_strict(out))
    return 0

"""Command line: ``python -m decision_pipeline s1mb {metrics,aggregate} FILE``.

``metrics FILE.jsonl``   one judgment per line -> ``{benchmark: {metric: value}}``
``aggregate FILE.json``  ``{model: {benchmark: {task, adjusted, eligible?, complete?}}}``
                         -> ``{model: {task_avg, task_scores, borda}}`` (0-1 scale)

Bad input prints one line (``FILE:LINE: what is wrong``) on stderr and exits 2; a byte that
is not UTF-8 names its line and byte, and a BOM or UTF-16 is named as such (common/textfile.py:
S1MB files are UTF-8 without a byte-order mark).

``metrics`` reads a file twice only when it is bad: a fast pass (C-speed JSON with a
duplicate-key hook, then column-wise checks over all lines, then the scoring library's
vectorised validation) accepts a file only if the strict per-line pass would accept it
with the same result; on anything else the strict pass reruns from line 1 and words
the error for the first bad line, exactly as before.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, repeat
from operator import is_not, itemgetter
from pathlib import Path
from typing import Any

from decision_pipeline.common.textfile import SAVE_AS, encoding_problem

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
    """Score every benchmark of a judgments file (D = all its lines of that benchmark).

    The fast pass decides only "valid, and here are the metrics"; whenever it cannot
    vouch for the file (any check fails, any exception) the strict pass decides.
    """
    collect = gc.isenabled()
    gc.disable()  # the fast pass builds ~10 objects per line and no cycles: collections only cost time
    try:
        return _metrics_fast(path)
    except Exception:  # noqa: BLE001 - the strict pass re-reads the file and words the error
        pass
    finally:
        if collect:
            gc.enable()
    return _metrics_strict(path)


class _Unvouched(Exception):
    """The fast pass met something it does not accept; the strict pass decides."""


def _fast_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # a duplicate key (loads_strict rejects it)
        raise _Unvouched
    return obj


def _fast_constant(name: str) -> Any:
    raise _Unvouched  # NaN, Infinity, -Infinity (loads_strict rejects them)


# No parse_float hook: an overflowing number (1e999 -> inf) can only sit where the checks
# below or the scoring library require a finite number, so it still sends the file to the
# strict pass (which names it as loads_strict does).
_FAST_DECODER = json.JSONDecoder(object_pairs_hook=_fast_object, parse_constant=_fast_constant)
_FIELD_SET = frozenset(_JUDGMENT_FIELDS)
_NOUL_IDS = (("false", "true"), ("true", "false"))
_get_id, _get_value = itemgetter("id"), itemgetter("value")


def _require(ok: bool) -> None:
    if not ok:
        raise _Unvouched


def _metrics_fast(path: str | Path) -> dict[str, dict[str, float | None]]:
    """Every check of the strict pass, done column-wise over all lines (see ``_judgment``).

    JSON: duplicate keys and NaN/Infinity literals raise in the decoder hooks. Lines:
    objects with exactly the judgment fields; ``safe_id`` per distinct benchmark;
    string case/question ids; known tasks, one per benchmark; no duplicate
    (benchmark, case, question); options = lists of >= 2 objects with keys in
    {id, value}, string ids unique per question, values null or finite numbers,
    noul ids false/true, score values all present and not all equal (``check_question``);
    target an object, prediction an object or null. Probabilities (keys = option ids,
    finite numbers in [0, 1], sum within 1e-5 of 1) are checked by ``score_decisions``,
    which validates targets and predictions the same way ``check_probabilities`` does.
    """
    decode = _FAST_DECODER.decode
    with open(path, encoding="utf-8") as stream:
        rows = [decode(line) for line in stream if line.strip()]
    _require(bool(rows) and set(map(type, rows)) == {dict} and set(map(frozenset, rows)) == {_FIELD_SET})
    bids, tasks, case_ids, question_ids, raws, targets, predictions = (list(map(itemgetter(k), rows))
                                                                       for k in _JUDGMENT_FIELDS)
    for bid in set(bids):
        safe_id(bid, "benchmark id")
    _require(set(map(type, case_ids)) == {str} and set(map(type, question_ids)) == {str})
    _require(set(tasks) <= set(TASKS))
    task_of = dict(zip(bids, tasks))
    _require(len(set(zip(bids, tasks))) == len(task_of))  # one task per benchmark
    _require(len(set(zip(bids, case_ids, question_ids))) == len(rows))  # no duplicate judgment
    _require(set(map(type, raws)) == {list} and min(map(len, raws)) >= 2)
    options = list(chain.from_iterable(raws))
    _require(set(map(type, options)) == {dict})
    option_ids = [tuple(map(_get_id, raw)) for raw in raws]  # KeyError: an option without "id"
    _require(set(map(type, chain.from_iterable(option_ids))) == {str})
    _require(sum(map(len, map(set, option_ids))) == len(options))  # ids unique within each question
    # keys within {id, value}: every option has "id", so its length must be 1 + ("value" in it)
    _require(sum(map(len, options)) == len(options) + sum(map(dict.__contains__, options, repeat("value"))))
    values = list(map(dict.get, options, repeat("value")))
    _require(set(map(type, values)) <= {type(None), int, float})
    _require(all(map(math.isfinite, filter(partial(is_not, None), values))))
    _require(all(ids in _NOUL_IDS for ids, task in zip(option_ids, tasks) if task == "noul"))
    _require(set(map(type, targets)) == {dict} and set(map(type, predictions)) <= {dict, type(None)})
    groups: dict[str, _Group] = {}
    for bid, task, case_id, question_id, raw, ids, target, prediction in zip(
            bids, tasks, case_ids, question_ids, raws, option_ids, targets, predictions):
        scale = None
        if task == "score":
            scale = tuple(map(float, map(_get_value, raw)))  # KeyError / TypeError: a missing value
            _require(len(set(scale)) >= 2)
        group = groups.get(bid) or groups.setdefault(bid, _Group(task))
        group.decisions.append(Decision(case_id, question_id, ids, target, scale))
        group.predictions.append(Prediction(case_id, question_id, error="null") if prediction is None
                                 else Prediction(case_id, question_id, prediction))
    return {bid: score_decisions(g.task, g.decisions, g.predictions, bid) for bid, g in groups.items()}


def _metrics_strict(path: str | Path) -> dict[str, dict[str, float | None]]:
    """Line by line: the first bad line (in file order) raises ``InputError`` naming it."""
    groups: dict[str, _Group] = {}
    seen: set[tuple[str, str, str]] = set()
    try:
        stream = open(path, "rb")  # decoded per line, so a bad byte names its line
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    with stream:
        problem = encoding_problem(stream.peek(4096)[:4096])
        if problem:
            raise InputError(f"{path}: {problem}; {SAVE_AS}")
        for number, raw in enumerate(stream, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise InputError(f"{path}:{number}: byte {err.start + 1} of the line (0x{raw[err.start]:02x}) "
                                 "is not UTF-8; save the file as UTF-8") from None
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
    parser = argparse.ArgumentParser(prog="python -m decision_pipeline s1mb", description=__doc__,
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

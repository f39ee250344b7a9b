"""Read S1MB evaluation-dataset rows and turn them into cases and decisions (§3.1-3.2).

Rows come from a local directory of Parquet, JSONL or Arrow (``save_to_disk``)
files. Conversion follows upstream ``case_from_row`` exactly: options keep the
authored criterion order, structured instructions/descriptions are rendered as
compact sorted JSON, and every target is validated against its options.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from decision_pipeline.common.textfile import SAVE_AS, encoding_problem

from .definitions import Benchmark
from .errors import S1MBError, show_ids
from .jsonio import loads_strict
from .records import Case, Decision, Option, Question, Target, check_probabilities, check_question

__all__ = ["read_rows", "case_from_row", "cases_for_benchmark", "benchmark_decisions", "load_cases"]

_ROW_FIELDS = ("case_id", "group_id", "language", "split", "input_hash", "input", "targets")


def _text(value: Any) -> str:
    """Strings verbatim; anything else as compact JSON with sorted keys (upstream ``_text``)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _parse(text: Any, what: str, **where: Any) -> Any:
    if not isinstance(text, str):
        raise S1MBError(f"{what} must be a JSON string, got {type(text).__name__}", **where)
    try:
        return loads_strict(text)
    except ValueError as err:
        raise S1MBError(f"{what} is not valid JSON ({err})", **where) from None


def read_rows(directory: str | Path, split: str = "test") -> list[dict[str, Any]]:
    """All rows of ``directory`` (or its ``<split>/`` folder): ``*.parquet``, ``*.jsonl``, ``*.arrow``."""
    base = Path(directory)
    if (base / split).is_dir():
        base = base / split
    files = sorted(p for p in base.iterdir() if p.suffix in {".parquet", ".jsonl", ".arrow"}) if base.is_dir() else []
    if not files:
        raise S1MBError("no *.parquet, *.jsonl or *.arrow files found", file=str(base))
    rows: list[dict[str, Any]] = []
    for path in files:
        rows.extend(_read_file(path))
    return rows


def _read_file(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        rows = []
        with path.open("rb") as stream:  # decoded per line, so a bad byte names its line (common/textfile.py)
            problem = encoding_problem(stream.peek(4096)[:4096])
            if problem:
                raise S1MBError(f"{problem}; {SAVE_AS}", file=str(path))
            for number, raw in enumerate(stream, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise S1MBError(f"line {number}: byte {err.start + 1} of the line (0x{raw[err.start]:02x}) is not "
                                    "UTF-8; save the file as UTF-8", file=str(path)) from None
                if line.strip():
                    try:
                        rows.append(loads_strict(line))
                    except ValueError as err:
                        raise S1MBError(f"line {number}: {err}", file=str(path)) from None
        return rows
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if path.suffix == ".parquet":
            table = pq.read_table(path)
        else:  # datasets.save_to_disk writes the Arrow streaming format
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_stream(source).read_all()
    except (OSError, pa.ArrowInvalid) as err:
        raise S1MBError(f"cannot read table ({err})", file=str(path)) from None
    return table.to_pylist()


def case_from_row(row: Mapping[str, Any], split: str = "test") -> Case:
    """Convert one raw dataset row to a validated ``Case`` (all task types kept)."""
    case_id = row.get("case_id") if isinstance(row, Mapping) else None
    if not isinstance(case_id, str):
        raise S1MBError(f"row needs a string case_id, got {case_id!r}")
    where = {"case": case_id}
    missing = [k for k in _ROW_FIELDS if k not in row]
    if missing:
        raise S1MBError(f"row is missing fields {missing}", **where)
    for key in ("group_id", "language", "input_hash"):
        if not isinstance(row[key], str):
            raise S1MBError(f"row {key} must be a string, got {row[key]!r}", **where)
    if row["split"] != split:
        raise S1MBError(f"row split {row['split']!r} differs from {split!r}", **where)
    source = row["input"]
    if not isinstance(source, Mapping) or not isinstance(source.get("decisions"), list):
        raise S1MBError("input must hold state_json and a decisions list", **where)
    _parse(source.get("state_json"), "input.state_json", **where)
    decisions, targets_in = source["decisions"], row["targets"]
    if not isinstance(targets_in, list) or not all(isinstance(t, Mapping) for t in targets_in):
        raise S1MBError("targets must be a list of objects", **where)
    ids = [d.get("id") if isinstance(d, Mapping) else None for d in decisions]
    if not all(isinstance(i, str) for i in ids) or not all(isinstance(t.get("decision_id"), str) for t in targets_in):
        raise S1MBError("every decision needs a string id and every target a string decision_id", **where)
    by_id = {t.get("decision_id"): t for t in targets_in}
    if len(set(ids)) != len(ids) or len(by_id) != len(targets_in) or set(ids) != set(by_id):
        raise S1MBError(
            f"every decision needs exactly one target: decisions {show_ids(ids)}, "
            f"targets {show_ids([t.get('decision_id') for t in targets_in])}",
            **where,
        )
    questions, targets = [], {}
    for decision in decisions:
        question = _question(decision, **where)
        targets[question.id] = _target(by_id[question.id], question, **where)
        questions.append(question)
    return Case(
        case_id=case_id, questions=tuple(questions), targets=targets,
        group_id=row["group_id"], language=row["language"],
        state_json=source["state_json"], input_hash=row["input_hash"],
    )


def _number(value: Any) -> Any:
    """Ints become floats like pydantic's ``float | None``; anything else (an int beyond float range
    included) is checked later."""
    return float(value) if type(value) is int and abs(value) <= 2 ** 1023 else value


def _question(decision: Any, **where: Any) -> Question:
    if not isinstance(decision, Mapping) or not isinstance(decision.get("id"), str):
        raise S1MBError("every decision needs a string id", **where)
    where = {**where, "question": decision["id"]}
    if decision.get("kind") != "judgment":
        raise S1MBError(f"decision kind {decision.get('kind')!r} is not 'judgment' "
                        "(S1MB scores judgments only)", **where)
    if decision.get("documents") or decision.get("scoring") is not None:
        raise S1MBError("judgments must have empty documents and null scoring", **where)
    criteria = decision.get("criteria") or []
    if not isinstance(criteria, list) or not all(isinstance(c, Mapping) and isinstance(c.get("id"), str) for c in criteria):
        raise S1MBError("every criterion needs a string id", **where)
    order = [c["id"] for c in criteria]
    if len(set(order)) != len(order):
        dupes = sorted({i for i in order if order.count(i) > 1})
        raise S1MBError(f"duplicate criterion ids {show_ids(dupes)}", **where)
    instructions = _text(_parse(decision.get("instructions_json"), "instructions_json", **where))
    if not instructions:
        raise S1MBError("instructions are empty", **where)
    options = tuple(
        Option(
            id=c["id"],
            description=_text(_parse(c.get("description_json"), f"criterion {c['id']!r} description_json", **where)),
            description_json=c.get("description_json"),
            value=_number(c.get("value")),
        )
        for c in criteria
    )
    question = Question(
        id=decision["id"], task=decision.get("type"), options=options, instructions=instructions,
        instructions_json=decision.get("instructions_json"),
        system_prompt=decision.get("system_prompt") or "",
    )
    check_question(question, **where)
    return question


def _target(target: Mapping[str, Any], question: Question, **where: Any) -> Target:
    where = {**where, "question": question.id}
    if target.get("kind") != "judgment_distribution":
        raise S1MBError(f"target kind {target.get('kind')!r} is not 'judgment_distribution'", **where)
    ids, probabilities = target.get("ids") or [], target.get("probabilities") or []
    if not isinstance(ids, list) or not isinstance(probabilities, list) or not all(isinstance(i, str) for i in ids):
        raise S1MBError("target ids must be a list of strings and probabilities a list of numbers", **where)
    if len(set(ids)) != len(ids):
        raise S1MBError(f"duplicate target ids {show_ids(ids)}", **where)
    if len(ids) != len(probabilities):
        raise S1MBError(f"target has {len(ids)} ids but {len(probabilities)} probabilities", **where)
    if not isinstance(target.get("annotation_kind"), str):
        raise S1MBError("target annotation_kind must be a string ('hard' or 'soft')", **where)
    distribution = dict(zip(ids, probabilities))
    check_probabilities(distribution, question.option_ids, what="target", **where)
    metadata = _parse(target.get("metadata_json") or "{}", "target metadata_json", **where)
    return Target(kind=target.get("annotation_kind"), probabilities=distribution, metadata=metadata)


def cases_for_benchmark(definition: Benchmark, cases: Iterable[Case]) -> list[Case]:
    """Keep questions of the benchmark's task, drop emptied cases, check counts (§3.2)."""
    kept: list[Case] = []
    for case in cases:
        questions = tuple(q for q in case.questions if q.task == definition.task)
        if len(questions) == len(case.questions):
            kept.append(case)
        elif questions:
            targets = {q.id: case.targets[q.id] for q in questions}
            kept.append(Case(case.case_id, questions, targets, case.group_id, case.language,
                             case.state_json, case.input_hash))
    seen: set[str] = set()
    for case in kept:
        if case.case_id in seen:
            raise S1MBError("duplicate case id", benchmark=definition.id, case=case.case_id)
        seen.add(case.case_id)
    decisions = sum(len(c.questions) for c in kept)
    if len(kept) != definition.case_count or decisions != definition.decision_count:
        raise S1MBError(
            f"dataset has {len(kept)} cases / {decisions} {definition.task} decisions but the "
            f"definition says {definition.case_count} / {definition.decision_count}",
            benchmark=definition.id,
        )
    return kept


def benchmark_decisions(definition: Benchmark, cases: Iterable[Case]) -> list[Decision]:
    """The benchmark's decisions D in dataset order (filters and checks via ``cases_for_benchmark``)."""
    out = []
    for case in cases_for_benchmark(definition, cases):
        for q in case.questions:
            values = tuple(o.value for o in q.options) if definition.task == "score" else None
            out.append(Decision(case.case_id, q.id, q.option_ids, case.targets[q.id].probabilities, values))
    return out


def load_cases(data_root: str | Path, definition: Benchmark) -> list[Case]:
    """Read ``<data_root>/<definition.dataset>`` and return the benchmark's cases."""
    root = Path(data_root)
    path = (root / definition.dataset).resolve()
    if not path.is_relative_to((root / "datasets").resolve()):
        raise S1MBError(f"dataset path {definition.dataset!r} escapes datasets/", benchmark=definition.id)
    cases = []
    for row in read_rows(path, definition.split):
        try:
            cases.append(case_from_row(row, definition.split))
        except S1MBError as err:
            raise err.at(benchmark=definition.id) from None
    return cases_for_benchmark(definition, cases)

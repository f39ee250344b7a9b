"""Records from outside the pipeline checked against a declared schema, one line per problem.

Why: an external file written by hand or exported by another tool gets types wrong in ways a
loader that only reads the keys it needs lets through: `"value": "big"` became a ValueError
traceback, `"level": 1e30` an overflow in pyarrow, an object as `question` its `str()`, a NaN a
silent NaN downstream, and a misspelt `tagret` was ignored, so the soft target it carried was
lost without a word. Each reader declares what a record may hold; anything else names the
file, line and field, and the stage exits 2 before it writes anything.

Encoding: a text input is UTF-8 without a byte-order mark (common/textfile.py); `input_file`
refuses a BOM or UTF-16 naming it, where the JSON reader would call line 1 "malformed".
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.textfile import check_head

MAX_TEXT_CHARS = 100_000  # a question or document beyond this is a paste accident, not a record


@dataclass(frozen=True)
class Field:
    """What one field may hold. `kinds` are Python types (bool never passes as a number)."""
    kinds: tuple[type, ...]
    required: bool = False
    min: float | None = None
    max: float | None = None
    max_chars: int = MAX_TEXT_CHARS
    max_items: int | None = None
    items: "Schema | None" = None  # for a list of objects: the schema of each


@dataclass(frozen=True)
class Schema:
    name: str  # what a record is, for messages ("question", "option", "document")
    fields: Mapping[str, Field]


def _kind_names(kinds: tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list",
             dict: "an object", type(None): "null"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _is_kind(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, int) and float in kinds:
        return True
    return isinstance(value, kinds)


def check_record(record: Any, schema: Schema, where: str) -> None:
    """Raise one PipelineError naming `where` and the field for the first thing `record` gets wrong."""
    if not isinstance(record, dict):
        raise PipelineError(f"{where}: expected a JSON object ({schema.name}), got {type(record).__name__}")
    unknown = sorted(set(record) - set(schema.fields))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(schema.fields), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise PipelineError(f"{where}: {schema.name} field '{unknown[0]}' is unknown{hint}; "
                            f"known fields are {', '.join(sorted(schema.fields))}")
    for name, spec in schema.fields.items():
        if name not in record or record[name] is None:
            if spec.required:
                raise PipelineError(f"{where}: {schema.name} is missing '{name}'")
            continue
        _check_value(record[name], spec, f"{where}: {schema.name} field '{name}'")


def _check_value(value: Any, spec: Field, what: str) -> None:
    if not _is_kind(value, spec.kinds):
        raise PipelineError(f"{what} must be {_kind_names(spec.kinds)}, got {type(value).__name__} {_short(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise PipelineError(f"{what} must be a finite number, got {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if spec.min is not None and value < spec.min:
            raise PipelineError(f"{what} must be >= {spec.min:g}, got {value!r}")
        if spec.max is not None and value > spec.max:
            raise PipelineError(f"{what} must be <= {spec.max:g}, got {value!r}")
    if isinstance(value, str) and len(value) > spec.max_chars:
        raise PipelineError(f"{what} has {len(value):,} characters, over the limit of {spec.max_chars:,}")
    if isinstance(value, list):
        if spec.max_items is not None and len(value) > spec.max_items:
            raise PipelineError(f"{what} has {len(value)} entries, over the limit of {spec.max_items}")
        if spec.items is not None:
            for i, item in enumerate(value):
                check_record(item, spec.items, f"{what} entry {i + 1}")
    if isinstance(value, dict):
        for key, item in value.items():
            # a float NaN/inf, or an int beyond float range (`1` and 400 zeros: float() overflows downstream)
            if isinstance(item, float) and not math.isfinite(item) or type(item) is int and abs(item) > 2 ** 1023:
                raise PipelineError(f"{what} entry {key!r} must be a finite number, got {_short(item)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def input_file(path: str | Path, key: str) -> Path:
    """An external input named by params `key`: a readable, non-empty file, or one clear line."""
    if str(path).strip() == "":
        raise PipelineError(f"params.yaml: {key} is empty; name a file, or configs/external/none for none")
    path = Path(path)
    if path.is_dir():
        raise PipelineError(f"{path}: is a directory; {key} must name a file (JSONL or Parquet)")
    if not path.is_file():
        raise PipelineError(f"{path}: file not found; fix {key} in params.yaml")
    if path.stat().st_size == 0:
        raise PipelineError(f"{path}: file is empty; {key} must name a file with records, "
                            "or configs/external/none for none")
    if path.suffix != ".parquet":  # a binary table; everything else is read as text
        check_head(path)
    return path


def checked_rows(rows: Iterator[tuple[int, dict]], schema: Schema, path: Path) -> Iterator[tuple[int, dict]]:
    """(line, record) pairs of a JSONL reader, each checked against `schema`; no record at all is an error."""
    seen = 0
    for lineno, row in rows:
        check_record(row, schema, f"{path}:{lineno}")
        seen += 1
        yield lineno, row
    if not seen:
        raise PipelineError(f"{path}: holds no {schema.name} records (only blank lines)")

"""Strict JSON for S1MB files: no NaN/Infinity, no duplicate keys, bounded size.

Upstream rejects non-finite numbers and duplicate keys on read *and* write so a
stored result can always be recomputed and compared to 1e-8. Python's ``json``
accepts both by default (and ``1e999`` silently becomes ``inf``), hence the
hooks below. ``.json.xz`` files are xz-compressed; writes are atomic. Text is UTF-8 without a
byte-order mark (common/textfile.py): a BOM, UTF-16 or a bad byte is named with its line and byte.
"""
from __future__ import annotations

import json
import lzma
import math
from pathlib import Path
from typing import Any

from decision_pipeline.common.io import write_bytes_atomic
from decision_pipeline.common.textfile import SAVE_AS, decode_problem, encoding_problem

from .errors import S1MBError

__all__ = ["MAX_JSON_BYTES", "loads_strict", "read_json", "write_json", "dumps_strict"]

MAX_JSON_BYTES = 64 * 1024 * 1024


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate JSON key {key!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite JSON number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"non-finite JSON number {text}")
    return value


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON; raise ``ValueError`` on NaN/Infinity, overflowing numbers or duplicate keys."""
    try:
        return json.loads(
            text,
            object_pairs_hook=_unique_object,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except json.JSONDecodeError as err:
        raise ValueError(f"invalid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except RecursionError:
        raise ValueError("invalid JSON: nested too deeply") from None


def dumps_strict(value: Any) -> str:
    """Serialise like upstream (2-space indent, UTF-8 kept, trailing newline); refuse NaN/Inf."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError as err:  # raised by allow_nan=False
        raise S1MBError(f"cannot write non-finite number as JSON ({err})") from None
    except TypeError as err:
        raise S1MBError(f"cannot write value as JSON ({err})") from None


def read_json(path: str | Path) -> Any:
    """Read a ``.json`` or ``.json.xz`` file strictly; every problem is an ``S1MBError``."""
    path = Path(path)
    try:
        with path.open("rb") as stream:
            payload = stream.read(MAX_JSON_BYTES + 1)
    except OSError as err:
        raise S1MBError(f"cannot read: {err.strerror or err}", file=str(path)) from None
    if len(payload) > MAX_JSON_BYTES:
        raise S1MBError("file exceeds 64 MiB", file=str(path))
    if path.name.endswith(".xz"):
        decoder = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=128 * 1024 * 1024)
        try:
            payload = decoder.decompress(payload, max_length=MAX_JSON_BYTES + 1)
        except lzma.LZMAError as err:
            raise S1MBError(f"not a valid xz stream ({err})", file=str(path)) from None
        if len(payload) > MAX_JSON_BYTES:
            raise S1MBError("decompressed JSON exceeds 64 MiB", file=str(path))
        if not decoder.eof or decoder.unused_data:
            raise S1MBError("truncated xz stream or trailing data", file=str(path))
    problem = encoding_problem(payload[:4096])
    if problem:
        raise S1MBError(f"{problem}; {SAVE_AS}", file=str(path))
    try:
        return loads_strict(payload.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise S1MBError(f"{decode_problem(payload, err)}; save the file as UTF-8", file=str(path)) from None
    except ValueError as err:
        raise S1MBError(str(err), file=str(path)) from None


def write_json(path: str | Path, value: Any) -> Path:
    """Write strictly and atomically (temp file + rename); ``.json.xz`` is compressed."""
    path = Path(path)
    payload = dumps_strict(value).encode("utf-8")
    if len(payload) > MAX_JSON_BYTES:
        raise S1MBError("JSON exceeds 64 MiB", file=str(path))
    if path.name.endswith(".xz"):
        payload = lzma.compress(payload, format=lzma.FORMAT_XZ)
    write_bytes_atomic(path, payload)
    return path

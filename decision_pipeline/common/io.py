"""Atomic outputs, line-atomic JSONL logs and schema-checked Parquet tables.

Why: DVC records whatever is on disk when a stage ends; a killed stage must leave
a complete output or none, and a long generation log must resume without
duplicated or half-written records.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from decision_pipeline.common.errors import PipelineError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _tmp_sibling(path: Path, suffix: str = "") -> Path:
    """A temporary file beside `path` with the permissions `open()` would give it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_umask())
    os.close(fd)
    return Path(tmp)


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary sibling to write `path` through (any writer: torch.save, savefig, ...); on success it
    is fsynced and renamed over `path`, on an exception removed, so `path` is whole or untouched.

    The one temp-then-rename of the project: a killed stage never leaves half a file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_sibling(path)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write bytes to a temporary sibling, fsync, then rename over `path`."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json(path: str | Path, obj: Any) -> None:
    """Atomic, sorted-key, 2-space JSON (stable diffs in git); NaN is refused."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_timings(path: str | Path, started: float, numbers: dict) -> None:
    """A stage's machine-dependent figures (wall time, throughput) beside, not inside, its metrics.

    Why: they change on every run, so inside `metrics/` they would dirty git and fill every
    `dvc metrics diff` with noise; as a cached DVC output they are kept per run and pushable.
    """
    import time
    write_json(path, {"machine_dependent": True, "wall_seconds": round(time.time() - started, 2), **numbers})


def _float_sized_int(text: str) -> int:
    """An integer a metric may hold: one a float can carry (every reader does arithmetic on it)."""
    if len(text.lstrip("-")) > 308:
        raise ValueError(f"the integer {text[:12]}... has {len(text.lstrip('-'))} digits, more than a number holds")
    return int(text)


def loads_json(text: str, where: str, redo: str) -> Any:
    """JSON a stage or a tool wrote (metrics, noise and claims files), parsed for readers that compute with it:
    an integer past a float's range or nesting past Python's limit is refused like a syntax error, in one line
    naming `where` and saying what to do (`redo`)."""
    try:
        return json.loads(text, parse_int=_float_sized_int)
    except json.JSONDecodeError as exc:
        raise PipelineError(f"{where}: not valid JSON ({exc.msg}, line {exc.lineno}); {redo}") from None
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise PipelineError(f"{where}: not valid JSON ({reason}); {redo}") from None


def read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: file not found; run the stage that writes it (dvc repro)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise PipelineError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary directory that replaces `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    old = path.with_name(f".{path.name}.old")
    moved_old = False
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            moved_old = True
        os.replace(tmp, path)
        if moved_old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if moved_old and not path.exists():
            os.replace(old, path)  # put the previous complete output back
        raise


# ---------------------------------------------------------------- JSONL logs

class JsonlAppender:
    """Append-only JSONL log keyed by an id field, safe to kill and resume.

    Each record is one `os.write` of a full line on an O_APPEND descriptor, so a
    kill can at worst leave a torn *last* line; opening repairs that by cutting
    the file back to its last newline, then `done` holds the ids already written.
    """

    def __init__(self, path: str | Path, id_key: str = "id", fsync: bool = False):
        self.path = Path(path)
        self.id_key = id_key
        self.fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.dropped_partial = repair_jsonl(self.path)
        self.done: set[str] = {str(r[id_key]) for r in read_jsonl(self.path)} if self.path.exists() else set()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, record: dict) -> None:
        key = str(record[self.id_key])
        if key in self.done:
            raise ValueError(f"{self.path}: id {key!r} already written")
        line = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")
        written = os.write(self._fd, line)
        if written != len(line):
            # a short write (disk full, signal) left a torn line: cut it now so the file ends on a
            # whole record, and fail loudly instead of writing the next record behind a fragment
            os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_END) - written)
            raise OSError(f"{self.path}: short write ({written} of {len(line)} bytes) for id {key!r}; "
                          "check free disk space and rerun to resume")
        if self.fsync:
            os.fsync(self._fd)
        self.done.add(key)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> "JsonlAppender":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def repair_jsonl(path: Path) -> bool:
    """Cut a torn trailing line (no final newline); return True if one was cut."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb+") as fh:
        data = fh.read()
        if data.endswith(b"\n"):
            return False
        fh.truncate(data.rfind(b"\n") + 1)
    return True


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line; a malformed line names file and line."""
    path = Path(path)
    if path.is_dir():
        raise PipelineError(f"{path}: is a directory; expected a JSONL file")
    if not path.is_file():
        raise PipelineError(f"{path}: file not found")
    with open(path, "rb") as fh:  # decoded per line, so bad bytes name their line
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise PipelineError(f"{path}:{lineno}: not UTF-8 (byte {exc.start + 1} of the line); "
                                    "save the file as UTF-8") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                raise PipelineError(f"{path}:{lineno}: malformed JSON ({exc.msg} column {exc.colno}); "
                                    "fix or remove the line") from None
            if not isinstance(row, dict):
                raise PipelineError(f"{path}:{lineno}: expected a JSON object per line")
            yield lineno, row


def read_jsonl(path: str | Path) -> list[dict]:
    """Read a JSONL file; a malformed line is an error naming file and line."""
    return [row for _, row in iter_jsonl(path)]


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> None:
    text = "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in rows)
    write_text_atomic(path, text)


# ---------------------------------------------------------------- Parquet

def write_table(path: str | Path, rows: list[dict], schema: pa.Schema) -> None:
    """Write rows as Parquet with a declared schema (extra or missing columns fail)."""
    names = set(schema.names)
    for i, row in enumerate(rows):
        if set(row) != names:
            extra, missing = sorted(set(row) - names), sorted(names - set(row))
            raise ValueError(f"{path}: row {i} does not match schema (extra {extra}, missing {missing})")
    table = pa.Table.from_pylist(rows, schema=schema)
    path = Path(path)
    tmp = _tmp_sibling(path, ".parquet")
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as fh:  # flushed to disk before the rename makes it visible
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def shard_files(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """A shard directory's own files with one of `suffixes`, in name order (the pool order).

    Shards are read from the directory itself, never from its subdirectories: a subdirectory holding
    shards (or a directory named like one, as Spark writes) is refused in one line rather than silently
    skipped, so no document a person meant to include is dropped without a word."""
    files = []
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            if entry.suffix in suffixes or any(p.suffix in suffixes for p in entry.rglob("*")):
                raise PipelineError(f"{entry}: a subdirectory holding {'/'.join('*' + s for s in suffixes)} shards "
                                    f"is not read (shards are read from {folder} itself); move its shards up into "
                                    f"{folder}, or out of it")
        elif entry.suffix in suffixes:
            files.append(entry)
    return files


def read_table(path: str | Path, schema: pa.Schema | None = None) -> list[dict]:
    """Read a Parquet table; when `schema` is given the file must carry exactly it."""
    path = Path(path)
    if path.is_dir():
        raise PipelineError(f"{path}: is a directory; expected one Parquet file")
    if not path.is_file():
        raise PipelineError(f"{path}: file not found; run the stage that writes it (dvc repro)")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:  # truncated or not Parquet at all: pyarrow raises several types
        reason = " ".join(str(exc).split()).split(". ")[0]
        reason = reason.split("': ", 1)[-1] if str(path) in reason else reason  # pyarrow repeats the path
        raise PipelineError(f"{path}: unreadable Parquet ({reason[:120]}); rerun the stage that writes it "
                            "or re-export the file") from None
    if schema is not None and not table.schema.remove_metadata().equals(schema):
        raise PipelineError(f"{path}: schema {table.schema.names} differs from the declared one {schema.names}")
    return table.to_pylist()

"""Tests for decision_pipeline.common.io: atomic outputs, resumable JSONL logs, schema-checked Parquet."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from decision_pipeline.common import io
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import (
    JsonlAppender,
    atomic_dir,
    read_json,
    read_jsonl,
    read_table,
    repair_jsonl,
    write_bytes_atomic,
    write_json,
    write_jsonl,
    write_table,
    write_text_atomic,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def _no_tmp(d: Path) -> None:
    leftovers = [n for n in _listing(d) if n.endswith(".tmp") or n.endswith(".old")]
    assert leftovers == [], f"temporary leftovers: {leftovers}"


# ------------------------------------------------------------------ atomic files
def test_write_bytes_atomic_creates_parents_and_leaves_no_temp(tmp_path):
    target = tmp_path / "a" / "b" / "out.bin"
    write_bytes_atomic(target, b"\x00\x01payload")
    assert target.read_bytes() == b"\x00\x01payload"
    assert _listing(target.parent) == ["out.bin"]


def test_write_text_atomic_overwrites(tmp_path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "old\n")
    write_text_atomic(target, "néw\n")
    assert target.read_bytes() == "néw\n".encode("utf-8")
    assert _listing(tmp_path) == ["out.txt"]


def test_failed_rename_keeps_old_content_and_cleans_temp(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def boom(src, dst):
        # the new bytes were fully written to the temp sibling before the rename
        assert Path(src).read_text() == "new"
        raise OSError("disk on fire")

    monkeypatch.setattr(io.os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        write_text_atomic(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert _listing(tmp_path) == ["out.txt"]


def test_interrupt_during_write_keeps_old_content(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    write_json(target, {"v": 1})

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(io.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_json(target, {"v": 2})
    monkeypatch.undo()
    assert read_json(target) == {"v": 1}
    assert _listing(tmp_path) == ["out.json"]


def test_write_json_unserialisable_keeps_old_file(tmp_path):
    target = tmp_path / "m.json"
    write_json(target, {"ok": 1})
    before = target.read_bytes()
    with pytest.raises(TypeError):
        write_json(target, {"ok": object()})
    assert target.read_bytes() == before
    assert _listing(tmp_path) == ["m.json"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_write_json_refuses_non_finite(tmp_path, bad):
    target = tmp_path / "m.json"
    write_json(target, {"x": 1.0})
    with pytest.raises(ValueError):
        write_json(target, {"x": bad})
    assert read_json(target) == {"x": 1.0}
    assert _listing(tmp_path) == ["m.json"]


def test_write_json_is_sorted_indented_with_newline(tmp_path):
    target = tmp_path / "m.json"
    write_json(target, {"b": [1, 2], "a": {"z": 1, "y": None}})
    assert target.read_text() == textwrap.dedent("""\
        {
          "a": {
            "y": null,
            "z": 1
          },
          "b": [
            1,
            2
          ]
        }
        """)
    assert read_json(target) == {"a": {"y": None, "z": 1}, "b": [1, 2]}


def test_read_json_missing_file(tmp_path):
    with pytest.raises(PipelineError, match="file not found") as excinfo:
        read_json(tmp_path / "nope.json")
    assert str(tmp_path / "nope.json") in str(excinfo.value)


def test_read_json_malformed_names_line(tmp_path):
    target = tmp_path / "bad.json"
    target.write_text('{\n  "a": 1,\n  "b": \n}\n')
    with pytest.raises(PipelineError) as excinfo:
        read_json(target)
    msg = str(excinfo.value)
    assert msg.startswith(f"{target}:4: not valid JSON")
    assert "\n" not in msg



def test_atomic_write_respects_umask_like_open(tmp_path):
    umask = os.umask(0)
    os.umask(umask)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")  # what open() gives: 0o666 & ~umask
    target = tmp_path / "out.txt"
    write_text_atomic(target, "new")
    assert stat.S_IMODE(target.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~umask


# ------------------------------------------------------------------ atomic_dir
def test_atomic_dir_creates_new_dir(tmp_path):
    out = tmp_path / "sub" / "model"
    with atomic_dir(out) as tmp:
        assert tmp != out and tmp.parent == out.parent and tmp.is_dir()
        assert not out.exists()  # nothing visible at `out` until the block succeeds
        (tmp / "weights.bin").write_bytes(b"w")
    assert _listing(out) == ["weights.bin"]
    assert _listing(out.parent) == ["model"]


def test_atomic_dir_replaces_existing_on_success(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "old.bin").write_text("old")
    with atomic_dir(out) as tmp:
        (tmp / "new.bin").write_text("new")
        assert (out / "old.bin").read_text() == "old"  # still intact during the block
    assert _listing(out) == ["new.bin"]
    assert _listing(tmp_path) == ["model"]


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_atomic_dir_keeps_old_dir_when_block_raises(tmp_path, exc):
    out = tmp_path / "model"
    out.mkdir()
    (out / "old.bin").write_text("old")
    with pytest.raises(exc):
        with atomic_dir(out) as tmp:
            (tmp / "half.bin").write_text("partial")
            raise exc()
    assert _listing(out) == ["old.bin"]
    assert (out / "old.bin").read_text() == "old"
    assert _listing(tmp_path) == ["model"]


def test_atomic_dir_block_raises_without_existing_dir(tmp_path):
    out = tmp_path / "model"
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as tmp:
            (tmp / "x").write_text("x")
            raise RuntimeError("fail")
    assert not out.exists()
    assert _listing(tmp_path) == []



def test_atomic_dir_failed_swap_restores_old_dir(tmp_path, monkeypatch):
    out = tmp_path / "model"
    out.mkdir()
    (out / "old.bin").write_text("old")
    real_replace = os.replace
    calls = []

    def flaky(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:
            raise OSError("rename failed")
        return real_replace(src, dst)

    monkeypatch.setattr(io.os, "replace", flaky)
    with pytest.raises(OSError):
        with atomic_dir(out) as tmp:
            (tmp / "new.bin").write_text("new")
    monkeypatch.undo()
    assert out.is_dir() and _listing(out) == ["old.bin"]


# ------------------------------------------------------------------ JSONL appender
def test_appender_append_reopen_and_duplicate(tmp_path):
    log = tmp_path / "logs" / "gen.jsonl"
    with JsonlAppender(log) as app:
        assert app.done == set() and app.dropped_partial is False
        app.append({"id": "a", "x": 1})
        app.append({"id": 2, "x": 2.5})
        assert app.done == {"a", "2"}
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        {"id": "a", "x": 1}, {"id": 2, "x": 2.5}]

    with JsonlAppender(log) as app:
        assert app.done == {"a", "2"}
        assert app.dropped_partial is False
        before = log.read_bytes()
        with pytest.raises(ValueError, match="already written"):
            app.append({"id": "a", "x": 99})
        with pytest.raises(ValueError, match="already written"):
            app.append({"id": "2"})  # ids compare as strings
        assert log.read_bytes() == before
        app.append({"id": "c"})
    assert [r["id"] for r in read_jsonl(log)] == ["a", 2, "c"]


def test_appender_custom_id_key(tmp_path):
    log = tmp_path / "g.jsonl"
    with JsonlAppender(log, id_key="item", fsync=True) as app:
        app.append({"item": "q1", "id": "same"})
        app.append({"item": "q2", "id": "same"})
    with JsonlAppender(log, id_key="item") as app:
        assert app.done == {"q1", "q2"}


def test_appender_rejects_nan_without_writing(tmp_path):
    log = tmp_path / "g.jsonl"
    with JsonlAppender(log) as app:
        app.append({"id": "a"})
        with pytest.raises(ValueError):
            app.append({"id": "b", "score": float("nan")})
        assert app.done == {"a"}
        app.append({"id": "b", "score": 0.5})  # the failed id is still free
    assert [r["id"] for r in read_jsonl(log)] == ["a", "b"]


def test_torn_last_line_is_cut_on_reopen(tmp_path):
    log = tmp_path / "g.jsonl"
    with JsonlAppender(log) as app:
        app.append({"id": "a", "text": "first"})
        app.append({"id": "b", "text": "second"})
    complete = log.read_bytes()
    with open(log, "ab") as fh:
        fh.write(b'{"id": "c", "text": "thi')  # killed mid-record: no newline
    with JsonlAppender(log) as app:
        assert app.dropped_partial is True
        assert app.done == {"a", "b"}
        assert log.read_bytes() == complete
        app.append({"id": "c", "text": "third"})
    rows = read_jsonl(log)
    assert [(r["id"], r["text"]) for r in rows] == [("a", "first"), ("b", "second"), ("c", "third")]


def test_torn_only_line_truncates_to_empty(tmp_path):
    log = tmp_path / "g.jsonl"
    log.write_bytes(b'{"id": "a"')
    assert repair_jsonl(log) is True
    assert log.read_bytes() == b""
    assert repair_jsonl(log) is False
    with JsonlAppender(log) as app:
        assert app.done == set()


def test_repair_jsonl_leaves_complete_file_alone(tmp_path):
    log = tmp_path / "g.jsonl"
    assert repair_jsonl(log) is False  # missing file
    log.write_bytes(b'{"id": "a"}\n{"id": "b"}\n')
    assert repair_jsonl(log) is False
    assert log.read_bytes() == b'{"id": "a"}\n{"id": "b"}\n'


_CHILD = textwrap.dedent("""
    import sys, time
    from decision_pipeline.common.io import JsonlAppender
    path, n = sys.argv[1], int(sys.argv[2])
    pad = "x" * 200
    with JsonlAppender(path) as app:
        for i in range(n):
            if str(i) not in app.done:
                app.append({"id": i, "pad": pad, "sq": i * i})
            if i % 500 == 499:
                time.sleep(0.01)  # keeps the run >= 1 s so the kill lands mid-way
""")


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")
def test_sigkill_mid_run_then_resume_has_no_torn_lines_or_duplicates(tmp_path):
    log = tmp_path / "gen.jsonl"
    n = 50_000
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(log), str(n)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not (log.exists() and log.stat().st_size > 100_000):
            assert child.poll() is None, f"child ended early: {child.stderr.read().decode()}"
            assert time.monotonic() < deadline, "child never wrote"
            time.sleep(0.002)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL

    with JsonlAppender(log) as app:
        # every surviving line is complete, parseable and a prefix of the run
        rows = read_jsonl(log)
        ids = [r["id"] for r in rows]
        assert 0 < len(ids) < n
        assert ids == list(range(len(ids)))
        assert all(r["sq"] == r["id"] ** 2 and len(r["pad"]) == 200 for r in rows)
        assert app.done == {str(i) for i in ids}
        for i in range(n):
            if str(i) not in app.done:
                app.append({"id": i, "pad": "x" * 200, "sq": i * i})
    final = read_jsonl(log)
    assert [r["id"] for r in final] == list(range(n))


def test_read_jsonl_malformed_line_names_file_and_line(tmp_path):
    log = tmp_path / "g.jsonl"
    log.write_text('{"id": 1}\n\n{"id": 2,}\n{"id": 3}\n')
    with pytest.raises(PipelineError) as excinfo:
        read_jsonl(log)
    msg = str(excinfo.value)
    assert msg.startswith(f"{log}:3: malformed JSON")
    assert "\n" not in msg


def test_read_jsonl_non_object_line(tmp_path):
    log = tmp_path / "g.jsonl"
    log.write_text('{"id": 1}\n[1, 2]\n')
    with pytest.raises(PipelineError, match=r":2: expected a JSON object"):
        read_jsonl(log)


def test_read_jsonl_skips_blank_lines_and_missing_file(tmp_path):
    log = tmp_path / "g.jsonl"
    log.write_text('{"id": 1}\n\n   \n{"id": 2}\n')
    assert read_jsonl(log) == [{"id": 1}, {"id": 2}]
    with pytest.raises(PipelineError, match="file not found"):
        read_jsonl(tmp_path / "missing.jsonl")


def test_write_jsonl_round_trip_and_nan(tmp_path):
    log = tmp_path / "rows.jsonl"
    rows = [{"id": "a", "v": [1, 2]}, {"id": "b", "v": {"k": "é"}}]
    write_jsonl(log, rows)
    assert read_jsonl(log) == rows
    assert log.read_text().count("\n") == 2
    with pytest.raises(ValueError):
        write_jsonl(log, [{"id": "c", "v": float("nan")}])
    assert read_jsonl(log) == rows
    assert _listing(tmp_path) == ["rows.jsonl"]


# ------------------------------------------------------------------ Parquet
SCHEMA = pa.schema([
    pa.field("id", pa.string(), nullable=False),
    pa.field("n", pa.int32()),
    pa.field("score", pa.float64()),
    pa.field("ok", pa.bool_()),
    pa.field("tags", pa.list_(pa.string())),
])

ROWS = [
    {"id": "a", "n": 1, "score": 0.5, "ok": True, "tags": ["x", "y"]},
    {"id": "b", "n": None, "score": -1.25, "ok": False, "tags": []},
]


def test_parquet_round_trip_with_declared_schema(tmp_path):
    path = tmp_path / "t" / "rows.parquet"
    write_table(path, ROWS, SCHEMA)
    assert read_table(path, SCHEMA) == ROWS
    assert read_table(path) == ROWS
    assert pq.read_schema(path).remove_metadata().equals(SCHEMA)
    assert _listing(path.parent) == ["rows.parquet"]


def test_parquet_empty_table_round_trip(tmp_path):
    path = tmp_path / "empty.parquet"
    write_table(path, [], SCHEMA)
    assert read_table(path, SCHEMA) == []


@pytest.mark.parametrize("row, words", [
    ({**ROWS[0], "extra": 1}, "extra ['extra']"),
    ({k: v for k, v in ROWS[0].items() if k != "score"}, "missing ['score']"),
])
def test_write_table_rejects_extra_or_missing_column(tmp_path, row, words):
    path = tmp_path / "rows.parquet"
    with pytest.raises(ValueError) as excinfo:
        write_table(path, [ROWS[1], row], SCHEMA)
    assert "row 1" in str(excinfo.value) and words in str(excinfo.value)
    assert not path.exists()
    assert _listing(tmp_path) == []


def test_write_table_bad_value_keeps_old_file(tmp_path):
    path = tmp_path / "rows.parquet"
    write_table(path, ROWS, SCHEMA)
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        write_table(path, [{**ROWS[0], "n": "not a number"}], SCHEMA)
    assert read_table(path, SCHEMA) == ROWS
    assert _listing(tmp_path) == ["rows.parquet"]


@pytest.mark.parametrize("other", [
    pa.schema([f for f in SCHEMA if f.name != "tags"]),  # column missing
    SCHEMA.append(pa.field("new", pa.int64())),  # column added
    SCHEMA.set(1, pa.field("n", pa.int64())),  # type changed
])
def test_read_table_schema_mismatch(tmp_path, other):
    path = tmp_path / "rows.parquet"
    write_table(path, ROWS, SCHEMA)
    with pytest.raises(PipelineError) as excinfo:
        read_table(path, other)
    msg = str(excinfo.value)
    assert str(path) in msg and "differs" in msg and "\n" not in msg


def test_read_table_missing_file(tmp_path):
    with pytest.raises(PipelineError, match="file not found") as excinfo:
        read_table(tmp_path / "nope.parquet", SCHEMA)
    assert "nope.parquet" in str(excinfo.value)


def test_short_write_is_cut_back_and_reported(tmp_path, monkeypatch):
    import os as _os

    import pytest as _pytest

    from decision_pipeline.common.io import JsonlAppender, read_jsonl
    path = tmp_path / "log.jsonl"
    with JsonlAppender(path) as log:
        log.append({"id": "a", "x": 1})
        real_write = _os.write
        monkeypatch.setattr(_os, "write", lambda fd, data: real_write(fd, data[:5]))
        with _pytest.raises(OSError, match="short write"):
            log.append({"id": "b", "x": 2})
        monkeypatch.setattr(_os, "write", real_write)
        log.append({"id": "c", "x": 3})
    assert [r["id"] for r in read_jsonl(path)] == ["a", "c"]

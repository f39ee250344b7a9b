"""The newer tools' bad input (#53): each case the issue found ending in a traceback, run as a person runs it
(the command line, in a scratch directory), ends in exit 2, one stderr line naming the file, key or variable
and what to do, and leaves every file as it was.

Why one table: the tools (noise study, review, docs numbers, the README table, the review app, the Ray pool
maker) each had their own reader and none was in tests/pipeline/test_bad_inputs.py, whose stage cases go
through `stage_main`. tests/pipeline/test_fuzz_tools.py draws the damage nobody lists here.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHA = "0123456789abcdef0123456789abcdef01234567"
PLAN = ".dvc/tmp/noise_study.json"
BEGIN = "<!-- results-table:begin (generated from metrics/summary.json; python -m decision_pipeline readme README.md) -->"


def _files(root: Path, files: dict[str, str | bytes], env: dict | None = None) -> dict:
    """Write `files` (relative path: content) under `root`; returns the case's extra environment (`env`)."""
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return env or {}


def _git(root: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    (root / "params.yaml").write_text("base:\n  seed: 10\n")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)


def _plan(root: Path, text: str) -> dict:
    _git(root)
    return _files(root, {PLAN: text})


def _doc(root: Path, doc: bytes = b"v <!--m x:a %.1f-->1.5<!--/m-->\n", metrics: bytes = b'{"a": 1.5}') -> dict:
    return _files(root, {"docs/d.md": doc, "metrics/x.json": metrics})


def _busy_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    _busy_port.held = sock  # type: ignore[attr-defined]  # kept open for the case, closed with the interpreter
    return sock.getsockname()[1]


RUN = {"plan": ["noise-study", "--collect"], "coverage": ["review", "--coverage"],
       "docs": ["docs-numbers", "docs/d.md"], "readme": ["readme", "README.md"], "ui": ["review-ui"]}
UI = {"REVIEW_CHARTER": str(ROOT / "configs/charter/charter.md"), "REVIEW_ANNOTATIONS": "absent.sqlite",
      "REVIEW_STORE": "live.sqlite"}

# case: (set-up in the scratch root -> extra env, command, words the one line holds)
CASES: dict[str, tuple[Callable[[Path], dict], list[str], str]] = {
    "plan not JSON": (lambda r: _plan(r, "{half"), RUN["plan"], f"{PLAN}: not valid JSON"),
    "plan without baseline": (lambda r: _plan(r, json.dumps({"runs": {}})), RUN["plan"],
                              f"{PLAN}: key 'baseline' is None, not a commit id"),
    "plan with an unknown source": (lambda r: _plan(r, json.dumps({"baseline": SHA, "runs": {"x": {
        "source": "moon", "overrides": {}}}})), RUN["plan"], f"{PLAN}: run 'x': source 'moon' is not one of"),
    "plan whose runs are a list": (lambda r: _plan(r, json.dumps({"baseline": SHA, "runs": ["x"]})),
                                   RUN["plan"], f"{PLAN}: key 'runs' is list"),
    "coverage over a noise file not JSON": (lambda r: _files(r, {"metrics/noise/reseed.json": "{x"}), RUN["coverage"],
                                            "metrics/noise/reseed.json: not valid JSON"),
    "docs: a doc in UTF-16": (lambda r: _doc(r, doc="v <!--m x:a %.1f-->1.5<!--/m-->\n".encode("utf-16")),
                              RUN["docs"], "docs/d.md: is UTF-16 (little-endian) with a byte-order mark"),
    "docs: a metrics file in UTF-16": (lambda r: _doc(r, metrics='{"a": 1.5}'.encode("utf-16")), RUN["docs"],
                                       "metrics/x.json: is UTF-16 (little-endian) with a byte-order mark"),
    "docs: a marker nested 800 deep": (lambda r: _doc(r, doc=f"v <!--m {'not ' * 800}x:a-->y<!--/m-->\n".encode()),
                                       RUN["docs"], "nests 802 levels deep; at most 100"),
    "readme: the table's end marker cut": (lambda r: _files(r, {"README.md": f"x\n{BEGIN}\n| old |\n",
                                                               "metrics/summary.json": "{}"}), RUN["readme"],
                                           "README.md: the results-table end marker is missing"),
    "review app: REVIEW_UI_PORT=abc": (lambda r: {**UI, "REVIEW_UI_PORT": "abc"}, RUN["ui"],
                                       "REVIEW_UI_PORT is 'abc'; give a port number from 1 to 65535"),
    "review app: a port in use": (lambda r: {**UI, "REVIEW_UI_PORT": str(_busy_port())}, RUN["ui"], "is in use"),
    "review app: a store that is not SQLite": (lambda r: _files(r, {"live.sqlite": "notes, not a database\n"}, UI),
                                               RUN["ui"], "live.sqlite: not a review store (file is not a database)"),
    "ray-pool over params.yaml": (lambda r: _files(r, {"params.yaml": "base: {}\n"}),
                                  [str(ROOT / "perf/bench_ray_curate.py"), "--make-pool", "params.yaml", "--docs", "10"],
                                  "params.yaml (RAY_POOL) is a file, not a shard directory"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_tool_on_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, case: str) -> None:
    setup, command, words = CASES[case]
    extra = setup(tmp_path)
    before = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*")
              if p.is_file() and ".git/" not in str(p)}
    argv = command if command[0].endswith(".py") else ["-m", "decision_pipeline", *command]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PIPELINE_QUIET": "1", **extra}
    proc = subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, f"{case}: exit {proc.returncode}\n{proc.stderr}"
    assert len(lines) == 1 and words in lines[0], f"{case}: {lines}"
    after = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*")
             if p.is_file() and ".git/" not in str(p)}
    assert after == before, f"{case}: files changed"

"""Joining a Ray cluster fails in one line, in bounded time, whatever answers at `ray.address` (#53).

Why: Ray's own `ray.init` waits forever on a port where another service answers (the dashboard's
8265 is the common mix-up) and retries a dead head for a minute. These run real local servers of
each kind (an aiohttp app as Ray's dashboard is one, a Redis-like reply, a silent listener, and a
bare HTTP/2 server that greets like a Ray head and then says nothing, which only the timeout stops);
no Ray cluster is needed, so they run with the fast tests.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from decision_pipeline.common import raycluster
from decision_pipeline.common.errors import PipelineError
from tests.scaling.ray_local import serve_dashboard

ROOT = Path(__file__).resolve().parents[2]
KEY = "curate.ray.address"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty HTTP/2 SETTINGS frame: how a gRPC server greets


@pytest.fixture(autouse=True)
def _loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """`connect` sets Ray's loopback switch for a 127.0.0.1 address: kept inside each test."""
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@pytest.fixture(scope="module")
def dashboard() -> int:
    """An aiohttp server on a free loopback port: what answers on Ray's dashboard port."""
    return serve_dashboard()


def _listener(reply: bytes | None) -> int:
    """A raw TCP service on a free loopback port that answers every connection with `reply` (None: silence)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def accept() -> None:
        while True:
            conn, _ = srv.accept()
            held.append(conn)
            if reply is not None:
                conn.recv(64)
                conn.sendall(reply)

    threading.Thread(target=accept, daemon=True).start()
    return srv.getsockname()[1]


def _refusal(address: str, timeout: float = 30.0) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(PipelineError) as info:
        raycluster.connect(address, KEY, timeout)
    return str(info.value), time.monotonic() - started


def test_the_dashboard_port_is_named_as_what_answered_in_seconds(dashboard):
    message, took = _refusal(f"127.0.0.1:{dashboard}")
    assert message.startswith(f"{KEY}: 127.0.0.1:{dashboard} is not a Ray head: an HTTP server answered "
                              "'HTTP/1.0 400 Bad Request' (Server: Python/"), message
    assert "aiohttp" in message and "dashboard (default port 8265)" in message and "\n" not in message
    assert took < raycluster.PROBE_SECONDS + 1


@pytest.mark.parametrize("reply, words", [
    (b"-ERR unknown command 'PRI'\r\n", "a service that is not a Ray head answered \"-ERR unknown command 'PRI'\""),
    (None, f"the service there sent nothing back in {raycluster.PROBE_SECONDS:g} s"),
])
def test_another_service_is_one_line(reply, words):
    port = _listener(reply)
    message, took = _refusal(f"127.0.0.1:{port}")
    assert message == (f"{KEY}: 127.0.0.1:{port} is not a Ray head: {words}; give the GCS address `ray start "
                       f"--head` printed (default port 6379) in {KEY}")
    assert took < raycluster.PROBE_SECONDS + 1


@pytest.mark.parametrize("address, words", [
    ("", f"{KEY} is empty; give the address"),
    ("   ", f"{KEY} is empty; give the address"),
    ("10.0.0.5", f"{KEY}: '10.0.0.5' is not host:port"),
    ("10.0.0.5:http", f"{KEY}: '10.0.0.5:http' is not host:port"),
    ("127.0.0.1:0", f"{KEY}: '127.0.0.1:0' is not host:port"),
    ("127.0.0.1:9", f"{KEY}: no Ray cluster answers at 127.0.0.1:9"),
])
def test_a_malformed_or_dead_address_is_one_line(address, words):
    message, took = _refusal(address)
    assert message.startswith(words) and "\n" not in message, message
    assert took < raycluster.PROBE_SECONDS + 1


def test_auto_takes_ray_address_from_the_environment(monkeypatch):
    """`auto` with RAY_ADDRESS set: that address, probed like a written one and named in the line."""
    port = _listener(None)
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    message, _ = _refusal("auto")
    assert message.startswith(f"{KEY}: 127.0.0.1:{port} (RAY_ADDRESS, for {KEY}: auto) is not a Ray head"), message


STAGE = """
import sys
from decision_pipeline.common import raypool
from decision_pipeline.common.log import stage_main
from decision_pipeline.common.raycluster import RayParams

@stage_main(ray_exit=True)
def main(argv):
    raypool.attach(RayParams(sys.argv[1], connect_timeout_s=float(sys.argv[2])), "curate.ray.address", 1,
                   "curate.ray.workers", 1)

raise SystemExit(main([]))
"""


def test_a_head_that_greets_and_never_answers_is_cut_at_connect_timeout_s(tmp_path):
    """An HTTP/2 server that sends the greeting a Ray head sends, then nothing: the probe passes, `ray.init`
    would wait forever; the stage (through stage_main) ends at `connect_timeout_s` with one line, exit 2."""
    port = _listener(SETTINGS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", STAGE, f"127.0.0.1:{port}", "4"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0] == (f"error: {KEY}: the Ray cluster at 127.0.0.1:{port} did not let this driver join within 4 s; "
                        f"check it (`ray status --address 127.0.0.1:{port}`), fix {KEY}, or raise "
                        "curate.ray.connect_timeout_s"), lines
    assert took < 4 + 30, took  # the 4 s wait plus importing Ray on a busy 2-core machine
    assert list(tmp_path.iterdir()) == []

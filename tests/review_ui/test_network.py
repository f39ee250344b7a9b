"""The review app on a network (#53): which Host names it answers to, over real HTTP, and its environment
variables as a person sets them (one line naming the variable, exit 2, nothing written).

Why: bound to 0.0.0.0 the app used to accept only `Host: 0.0.0.0:PORT`, which no browser sends, so it
served nobody; a loopback bind must keep refusing foreign names (a DNS-rebinding page). The app runs as
`make review-ui` runs it (tests/review_ui/live_server.py) and is reached at the machine's own
non-loopback address, not through 127.0.0.1.
"""
from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.review_ui import network
from tests.review_ui.live_server import free_port, live_server
from tests.review_ui.review_helpers import CHARTER, ROOT


def _own_address() -> str:
    """A non-loopback IPv4 address of this machine (the one a colleague's browser would use)."""
    found = sorted(a for a in network.machine_names() if "." in a and a[0].isdigit() and not network.is_loopback(a))
    if not found:
        pytest.skip("this machine has no non-loopback IPv4 address")
    return found[0]


def _status(address: str, port: int, host: str) -> int:
    """GET /login at address:port (a real TCP connection there) with the given Host header."""
    conn = http.client.HTTPConnection(address, port, timeout=30)
    try:
        conn.request("GET", "/login", headers={"Host": host})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_bound_to_all_interfaces_it_answers_the_machines_own_names_and_addresses(tmp_path):
    ip = _own_address()
    with live_server(tmp_path, names=(), extra_env={"REVIEW_UI_HOST": "0.0.0.0"}) as server:
        port = server.port
        assert _status(ip, port, f"{ip}:{port}") == 200                       # the machine's own address
        assert _status(ip, port, f"{socket.gethostname()}:{port}") == 200     # its name
        assert _status(ip, port, f"{socket.gethostname().upper()}:{port}") == 200
        assert _status("127.0.0.1", port, f"localhost:{port}") == 200
        assert _status(ip, port, ip) == 200                                    # no port in the header
        assert _status(ip, port, f"rebind.evil.example:{port}") == 400
        assert _status(ip, port, f"0.0.0.0:{port}") == 400                    # not a name anyone browses to
        assert _status(ip, port, "") == 400
        log = (tmp_path / "server.log").read_text()
        assert f"listening on 0.0.0.0" in log and ip in log


def test_allowed_hosts_replace_the_default(tmp_path):
    ip = _own_address()
    env = {"REVIEW_UI_HOST": "0.0.0.0", "REVIEW_UI_ALLOWED_HOSTS": "review.lab.example, .team.example"}
    with live_server(tmp_path, names=(), extra_env=env) as server:
        port = server.port
        assert _status(ip, port, f"review.lab.example:{port}") == 200
        assert _status(ip, port, f"ada.team.example:{port}") == 200
        assert _status(ip, port, f"team.example.evil:{port}") == 400
        assert _status(ip, port, f"{ip}:{port}") == 400


def test_a_loopback_bind_serves_loopback_names_only(tmp_path):
    ip = _own_address()
    with live_server(tmp_path, names=()) as server:
        port = server.port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            assert _status("127.0.0.1", port, host) == 200, host
        for host in (f"{ip}:{port}", f"{socket.gethostname()}:{port}", f"rebind.evil.example:{port}"):
            assert _status("127.0.0.1", port, host) == 400, host


@pytest.mark.parametrize("header, allowed, expected", [
    ("127.0.0.1:8765", ("127.0.0.1",), True),
    ("[::1]:8765", ("::1",), True),
    ("[0:0:0:0:0:0:0:1]", ("::1",), True),
    ("LocalHost:1", ("localhost",), True),
    ("localhost.:1", ("localhost",), True),
    ("a.b.example:1", (".b.example",), True),
    ("b.example:1", (".b.example",), False),
    ("evil.example:1", ("*",), True),
    ("evil.example:1", ("127.0.0.1",), False),
    ("bad host:1", ("*",), False),
    (None, ("*",), False),
    ("127.0.0.1:8765", ("127.0.0.1:9999",), True),   # an entry's port is ignored, as werkzeug's TRUSTED_HOSTS did
])
def test_host_matching(header, allowed, expected):
    assert network.host_allowed(header, allowed) is expected


def test_allowed_hosts_defaults_and_bad_entries():
    assert network.allowed_hosts("127.0.0.1", {}) == ("127.0.0.1", "::1", "localhost")
    wide = network.allowed_hosts("0.0.0.0", {})
    assert socket.gethostname().lower() in wide and "0.0.0.0" not in wide and "127.0.0.1" in wide
    assert network.allowed_hosts("0.0.0.0", {"REVIEW_UI_ALLOWED_HOSTS": "A.example,[::1]:80 10.0.0.5"}) == (
        "10.0.0.5", "::1", "a.example")
    with pytest.raises(PipelineError, match=r"^REVIEW_UI_ALLOWED_HOSTS: 'a/b' is not a host name or address"):
        network.allowed_hosts("0.0.0.0", {"REVIEW_UI_ALLOWED_HOSTS": "ok.example,a/b"})


@pytest.mark.parametrize("value", ["abc", "0", "70000", "-1", "80.5", "8765x"])
def test_a_bad_port_variable_is_one_line(value):
    with pytest.raises(PipelineError, match=rf"^REVIEW_UI_PORT is {value!r}; give a port number from 1 to 65535"):
        network.port_from_env({"REVIEW_UI_PORT": value})
    assert network.port_from_env({}) == 8765 and network.port_from_env({"REVIEW_UI_PORT": " 9000 "}) == 9000


def _serve(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "REVIEW_CHARTER": CHARTER, "REVIEW_STORE": str(tmp_path / "live.sqlite"),
            "REVIEW_ANNOTATIONS": str(tmp_path / "absent.sqlite"), "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "decision_pipeline", "review-ui"], cwd=tmp_path, env=full,
                          capture_output=True, text=True, timeout=60)


def _listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", ["port-abc", "port-in-use", "store-not-sqlite", "store-a-directory",
                                  "annotations-not-sqlite", "host-bad", "allowed-bad"])
def test_the_app_environment_as_a_person_gets_it_wrong(tmp_path, case):
    """`make review-ui` with one variable wrong: exit 2, one line naming it, no traceback, nothing written."""
    (tmp_path / "notes.txt").write_text("not a database\n")
    env, words = {"REVIEW_UI_PORT": str(free_port())}, ""
    busy = None
    if case == "port-abc":
        env, words = {"REVIEW_UI_PORT": "abc"}, "REVIEW_UI_PORT is 'abc'"
    elif case == "port-in-use":
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        env, words = {"REVIEW_UI_PORT": str(port)}, f"REVIEW_UI_PORT {port} on 127.0.0.1 is in use"
    elif case == "store-not-sqlite":
        env["REVIEW_STORE"], words = str(tmp_path / "notes.txt"), "notes.txt: not a review store (file is not a database)"
    elif case == "store-a-directory":
        (tmp_path / "dir").mkdir()
        env["REVIEW_STORE"], words = str(tmp_path / "dir"), "dir: is a directory, not a review store"
    elif case == "annotations-not-sqlite":
        env["REVIEW_ANNOTATIONS"], words = str(tmp_path / "notes.txt"), "notes.txt: not the pipeline's review store"
    elif case == "host-bad":
        env["REVIEW_UI_HOST"], words = "not a host", "REVIEW_UI_HOST is 'not a host'"
    else:
        env["REVIEW_UI_ALLOWED_HOSTS"], words = "ok.example,http://x", "REVIEW_UI_ALLOWED_HOSTS: 'http://x'"
    before = _listing(tmp_path)
    try:
        proc = _serve(tmp_path, **env)
    finally:
        if busy is not None:
            busy.close()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[-1].startswith("error: ") and words in lines[-1], lines
    assert len(lines) == 1, lines
    assert _listing(tmp_path) == before

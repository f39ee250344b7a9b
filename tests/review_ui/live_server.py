"""The real review app over real HTTP, for the tests that must not go through Flask's test client:
`python -m decision_pipeline review-ui` (waitress) in a subprocess on a free 127.0.0.1 port, and a
small cookie-keeping HTTP client that can speak from another loopback address (127.0.0.2, ...) so
the per-address sign-in throttle can be told apart from the per-name one."""
from __future__ import annotations

import contextlib
import http.client
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Iterator

from tests.review_ui.review_helpers import CHARTER, ROOT, make_annotations

from decision_pipeline.charter import store


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveServer:
    """A running app: its base URL, live store, the secrets add-reviewer printed, and its process."""
    base: str
    port: int
    live: str
    env: dict
    cwd: Path
    proc: subprocess.Popen
    secrets: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """`python -m decision_pipeline review-ui ARGS` on this server's live store, as a lead runs it."""
        return subprocess.run([sys.executable, "-m", "decision_pipeline", "review-ui", *args], cwd=self.cwd,
                              env=self.env, capture_output=True, text=True, timeout=120)

    def cpu_seconds(self) -> float:
        """User + system CPU the server process has used so far (from /proc; 10 ms ticks)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def live_server(tmp_path: Path, names: tuple[str, ...] = ("ada", "ben"),
                pythonpath: str | None = None) -> Iterator[LiveServer]:
    """Start the app as `make review-ui` does (reflections synced from a pipeline store built here,
    accounts made with add-reviewer); stop it afterwards. `pythonpath`: serve another checkout's app."""
    pipeline_store = tmp_path / "pipeline.sqlite"
    conn = store.open_store(pipeline_store)
    store.add_annotations(conn, make_annotations())
    conn.close()
    live, port = tmp_path / "live.sqlite", free_port()
    env = dict(os.environ, REVIEW_STORE=str(live), REVIEW_ANNOTATIONS=str(pipeline_store),
               REVIEW_CHARTER=CHARTER, REVIEW_UI_PORT=str(port), PYTHONPATH=pythonpath or str(ROOT))
    made = {}
    for name in names:  # the printed secret is what a reviewer types
        out = subprocess.run([sys.executable, "-m", "decision_pipeline", "review-ui", "add-reviewer", name],
                             cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
        made[name] = out.stdout.strip().splitlines()[-1]
    log_path = tmp_path / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "decision_pipeline", "review-ui"], cwd=tmp_path, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        server = LiveServer(f"http://127.0.0.1:{port}", port, str(live), env, tmp_path, proc, made)
        try:
            deadline = time.time() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.time() > deadline:
                        raise AssertionError("review UI did not start: " + log_path.read_text())
                    time.sleep(0.1)
            yield server
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: str

    @property
    def location(self) -> str:
        return self.headers.get("location", "")


class Client:
    """A minimal browser over http.client: keeps cookies, sends the page's CSRF token with each form,
    and connects from `source` (any 127.x.y.z address reaches a server bound to 127.0.0.1 on Linux)."""

    def __init__(self, server: LiveServer, source: str = "127.0.0.1"):
        self.server, self.source = server, source
        self.cookies: dict[str, str] = {}
        self.csrf = ""

    def request(self, method: str, path: str, form: dict | None = None) -> Reply:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60,
                                          source_address=(self.source, 0))
        headers = {"Host": f"127.0.0.1:{self.server.port}"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode({"csrf_token": self.csrf, **form})
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            reply = Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode())
            for raw in resp.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(raw).items():
                    if morsel["expires"] and "1970" in morsel["expires"] or morsel["max-age"] == "0":
                        self.cookies.pop(name, None)
                    else:
                        self.cookies[name] = morsel.value
        finally:
            conn.close()
        token = re.search(r'name="csrf_token" value="([^"]+)"', reply.body)
        if token:
            self.csrf = token.group(1)
        return reply

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def post(self, path: str, form: dict) -> Reply:
        return self.request("POST", path, form)

    def sign_in(self, name: str, secret: str | None = None) -> Reply:
        """GET the form (for its CSRF token), then POST name + secret (the account's own by default)."""
        if not self.csrf:
            self.get("/login")
        return self.post("/login", {"name": name, "secret": self.server.secrets.get(name, "")
                                    if secret is None else secret})

"""Fixtures for the charter tests: the project's charter file and small texts."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from decision_pipeline.charter.charter import load_charter, parse_charter
from decision_pipeline.charter.checks import CheckParams

SMALL_CHARTER = """# Charter

## 1 Honesty

### 1.1 Truthful claims
Say only what the text supports and mark unverified claims as such.

## 2 Harm

### 2.1 Hostile language
Insults aimed at people are not repeated or rewarded in any reply.
"""


@pytest.fixture(scope="session")
def charter():
    return load_charter("configs/charter/charter.md")


@pytest.fixture(scope="session")
def small_charter():
    return parse_charter(SMALL_CHARTER, "small-charter")


@pytest.fixture
def checks() -> CheckParams:
    return CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5)


class Stub(ThreadingHTTPServer):
    """Answers each POST with the next scripted chat content (RAW:<body> sends <body> as the whole reply)."""
    daemon_threads = True

    def __init__(self, script: list[str]):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script, self.bodies = list(script), []


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        self.server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        content = self.server.script.pop(0)
        data = content[4:].encode() if content.startswith("RAW:") else json.dumps(
            {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def stub():
    """make(script) -> (server, EndpointImprover at it): a local HTTP server standing in for the
    improver's OpenAI-compatible endpoint, answering the scripted contents in order."""
    from decision_pipeline.charter.improver import EndpointImprover

    def make(script: list[str]) -> tuple[Stub, EndpointImprover]:
        server = Stub(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
        return server, EndpointImprover(f"http://127.0.0.1:{server.server_address[1]}/v1", "improver", 5.0)
    made: list[Stub] = []
    yield make
    for s in made:
        s.shutdown()
        s.server_close()

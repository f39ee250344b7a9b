"""The LLM judge path against a real HTTP server on 127.0.0.1 (a small stdlib stub that
answers /v1/chat/completions with scripted contents): strict schema in the request,
one retry on malformed output, then a counted failure; an unreachable judge is an error."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from decision_pipeline.charter.checks import CheckParams, split_voices
from decision_pipeline.charter.judge import ChatJudge, JudgeParams, judge_all, judge_one, make_judge
from decision_pipeline.charter.prompts import load_prompt
from decision_pipeline.charter.ranking import judge_summary
from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.common.errors import PipelineError

GOOD = json.dumps({v: {d: 5 for d in DIMENSIONS} for v in VOICES})
OUT_OF_RANGE = json.dumps({v: {d: 7 for d in DIMENSIONS} for v in VOICES})
NO_OBSERVER = json.dumps({"first_person": {d: 5 for d in DIMENSIONS}})


class Stub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: list[str]):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script, self.bodies, self.lock = list(script), [], threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.bodies.append(body)
            content = self.server.script.pop(0) if self.server.script else GOOD
        data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                        "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def stub():
    servers = []

    def start(script: list[str]) -> tuple[Stub, str]:
        s = Stub(script)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append(s)
        return s, f"http://127.0.0.1:{s.server_address[1]}/v1"
    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def cfg(url: str, repeats: int = 1) -> JudgeParams:
    return JudgeParams(kind="chat", name="stub-judge", prompt="configs/prompts/judge.md", base_url=url, model="m",
                       temperature=0.7, max_tokens=64, timeout_s=5.0, concurrency=2, repeats=repeats, retries=1,
                       checks=CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5))


ITEM = {"id": "c/d1", "document": "Q: How do I reset the router firmware safely?", "safety_score": 0,
        "reflection": "First person: I would list the reset steps [3.1].\nObserver: The router question needs steps [3.1]."}
ITEM["voices"] = split_voices(ITEM["reflection"])


def test_request_carries_the_strict_schema_and_good_output_scores(stub, charter):
    server, url = stub([GOOD])
    c = cfg(url)
    rec = judge_one(make_judge(c, charter), ITEM, load_prompt(c.prompt, charter), charter, c, repeat=0)
    assert rec["verdict"] == "accept" and rec["attempts"] == 1 and rec["failure"] is None
    fmt = server.bodies[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["properties"]["observer"]["additionalProperties"] is False
    assert "[3.1] Practical help." in server.bodies[0]["messages"][0]["content"]  # {charter} substituted


@pytest.mark.parametrize("first", ["not json at all", OUT_OF_RANGE, NO_OBSERVER, ""])
def test_malformed_output_gets_one_retry(stub, charter, first):
    server, url = stub([first, GOOD])
    c = cfg(url)
    rec = judge_one(ChatJudge(c), ITEM, load_prompt(c.prompt, charter), charter, c, repeat=0)
    assert rec["attempts"] == 2 and rec["verdict"] == "accept" and len(server.bodies) == 2


def test_twice_malformed_is_a_counted_failure_never_a_default_score(stub, charter):
    server, url = stub([OUT_OF_RANGE, "{}", GOOD, GOOD])
    c = cfg(url, repeats=1)
    items = [ITEM, {**ITEM, "id": "c/d2"}]
    c.concurrency = 1
    records = judge_all(ChatJudge(c), items, load_prompt(c.prompt, charter), charter, c)
    failed = [r for r in records if r["verdict"] is None]
    assert len(failed) == 1 and failed[0]["annotation_id"] == "c/d1" and failed[0]["scores"] is None
    assert "missing voice 'first_person'" in failed[0]["failure"]
    assert failed[0]["attempts"] == 2
    summary = judge_summary(records, {i["id"]: i for i in items})
    assert summary["judge_failures"] == 1 and summary["n_scored"] == 1 and summary["accept_rate"] == 1.0


def test_unreachable_judge_names_the_judge(charter):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = cfg(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(PipelineError, match=r"judge 'stub-judge': http://127.0.0.1:\d+/v1/chat/completions unreachable"):
        judge_one(ChatJudge(c), ITEM, load_prompt(c.prompt, charter), charter, c, repeat=0)

"""The `openai` backend against the real `decision_pipeline.lm.serve` server (tiny model) and small stub servers.

Stubs are stdlib HTTP servers on 127.0.0.1 that fail on purpose (503 then
proxy, 4xx, slow answers, missing token_ids) so retries, timeouts and errors
are exercised over real sockets.
"""
from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm import serve
from decision_pipeline.lm.backends import SamplingSettings, make_backend
from decision_pipeline.lm.backends.hf import HFBackend
from decision_pipeline.lm.backends.openai import OpenAIBackend
from decision_pipeline.lm.model import TinyModelSpec, build_tiny_model, load_model
from decision_pipeline.lm.bpe import load_tokenizer, train_bpe, wrap_fast

WORDS = "the cat dog sat ran on a mat log red blue big small and then it was".split()


def _corpus(lines: int = 400) -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) + f" {rng.randint(0, 99)}."
            for _ in range(lines)]


class Stats:
    """Server-side counters: requests seen and the most HTTP requests open at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self, delay: float = 0.0) -> None:
        self.active = self.max_active = self.requests = 0
        self.delay = delay


def _counting(base: type, stats: Stats) -> type:
    class Counting(base):  # type: ignore[misc, valid-type]
        def do_POST(self) -> None:  # noqa: N802
            with stats.lock:
                stats.requests += 1
                stats.active += 1
                stats.max_active = max(stats.max_active, stats.active)
            self._open = True
            time.sleep(stats.delay)
            super().do_POST()

        def send_response(self, *args: Any, **kwargs: Any) -> None:
            # leave the count before any byte of the answer goes out, so a client's next request can't overlap
            if getattr(self, "_open", False):
                self._open = False
                with stats.lock:
                    stats.active -= 1
            super().send_response(*args, **kwargs)
    return Counting


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory):
    fast = wrap_fast(train_bpe(_corpus(), vocab_size=300, required_tokens=(), min_frequency=2), model_max_length=128)
    spec = TinyModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=128)
    model = build_tiny_model(spec, vocab_size=len(fast), pad_token_id=fast.pad_token_id,
                             eos_token_id=fast.eos_token_id, seed=0)
    path = tmp_path_factory.mktemp("tiny") / "tiny-lm"
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    return load_tokenizer(model_dir)


@pytest.fixture(scope="module")
def served(model_dir):
    """The real server in a thread, its handler wrapped with counters; yields (base_url, stats)."""
    server, thread, url = serve.start_server(model_dir, port=0)
    stats = Stats()
    server.RequestHandlerClass = _counting(server.RequestHandlerClass, stats)
    yield url, stats
    serve.stop_server(server, thread)
    assert not thread.is_alive()


@pytest.fixture()
def stats(served) -> Stats:
    served[1].reset()
    return served[1]


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:
    texts = ["the cat sat on", "a big red dog ran and then", "blue", "it was small 7."]
    return [tokenizer.encode(t, add_special_tokens=False) for t in texts]


def _backend(url: str, **kwargs: Any) -> OpenAIBackend:
    return OpenAIBackend(base_url=url, model="tiny-lm", **{"backoff_s": 0.01, **kwargs})


def _http(method: str, url: str, payload: Any = None, raw: bytes | None = None) -> tuple[int, dict]:
    data = raw if raw is not None else (json.dumps(payload).encode() if payload is not None else None)
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class _Stub(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out leave broken pipes behind; expected here


class _StubHandler(BaseHTTPRequestHandler):
    server: Any

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            index = self.server.count
            self.server.count += 1
            self.server.seen.append((dict(self.headers), body))
        status, payload = self.server.respond(index, body)
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def stub_server(respond: Callable[[int, dict], tuple[int, Any]]) -> Iterator[Any]:
    """A stdlib server answering POSTs with `respond(request_index, body) -> (status, json or bytes)`."""
    stub = _Stub(("127.0.0.1", 0), _StubHandler)
    stub.respond, stub.count, stub.seen, stub.lock = respond, 0, [], threading.Lock()
    thread = threading.Thread(target=stub.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{stub.server_address[1]}/v1"
    try:
        yield stub
    finally:
        stub.shutdown()
        stub.server_close()
        thread.join(timeout=5)


def _forward(url: str, body: dict) -> dict:
    return _http("POST", url + "/completions", body)[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_round_trip_counts_order_decoding_and_length(served, stats, prompts, tokenizer):
    backend = make_backend("openai", base_url=served[0] + "/", model="tiny-lm", concurrency=2)
    assert isinstance(backend, OpenAIBackend) and backend.name == "openai"
    out = backend.generate(prompts, SamplingSettings(max_new_tokens=3, temperature=1.0, n=2, seed=5))
    assert len(out) == len(prompts) * 2 and stats.requests == len(prompts)
    assert [(c.prompt_index, c.sample_index) for c in out] == [(p, s) for p in range(len(prompts)) for s in range(2)]
    for c in out:
        assert tokenizer.decode(c.token_ids, skip_special_tokens=False) == c.text
        assert c.prompt_tokens == len(prompts[c.prompt_index]) and c.seconds > 0
        stopped = c.token_ids[-1] == tokenizer.eos_token_id
        assert c.finish_reason == ("stop" if stopped else "length")
        assert len(c.token_ids) == 3 or stopped
    assert any(c.finish_reason == "length" for c in out)
    assert backend.completion_tokens == sum(len(c.token_ids) for c in out)
    again = backend.generate(prompts, SamplingSettings(max_new_tokens=3, temperature=1.0, n=2, seed=5))
    assert [c.token_ids for c in again] == [c.token_ids for c in out]  # seeded: reruns reproduce


def test_greedy_equals_in_process_hf_backend(served, prompts, model_dir):
    settings = SamplingSettings(max_new_tokens=8, temperature=0.0)
    remote = _backend(served[0]).generate(prompts, settings)
    local = HFBackend(load_model(model_dir), load_tokenizer(model_dir)).generate(prompts, settings)
    assert [(c.token_ids, c.text, c.finish_reason) for c in remote] == \
        [(c.token_ids, c.text, c.finish_reason) for c in local]


def test_stop_token_ids_reach_the_server(served, prompts):
    backend = _backend(served[0])
    sampled = SamplingSettings(max_new_tokens=8, temperature=1.0, seed=3)  # seeded, so the prefix repeats
    full = backend.generate(prompts[:1], sampled)[0].token_ids
    k = next(k for k, t in enumerate(full) if k > 0 and t not in full[:k])
    cut = backend.generate(prompts[:1], replace(sampled, stop_token_ids=(full[k],)))[0]
    assert cut.token_ids == full[:k + 1] and cut.finish_reason == "stop"


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_limit_respected(served, stats, prompts, concurrency):
    stats.reset(delay=0.1)  # each request stays open a while so overlaps are visible
    out = _backend(served[0], concurrency=concurrency).generate(prompts * 2, SamplingSettings(max_new_tokens=2))
    assert len(out) == 8 and stats.requests == 8
    assert stats.max_active == concurrency


def test_retries_503_then_succeeds(served, prompts):
    settings = SamplingSettings(max_new_tokens=4, temperature=0.0)
    with stub_server(lambda i, body: (503, {"error": {"message": "warming up"}}) if i < 2
                     else (200, _forward(served[0], body))) as stub:
        out = _backend(stub.url, max_retries=4, concurrency=1).generate(prompts[:1], settings)
    assert stub.count == 3
    assert out[0].token_ids == _backend(served[0]).generate(prompts[:1], settings)[0].token_ids


def test_unreachable_endpoint_fails_fast_and_clearly(prompts):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    started = time.perf_counter()
    with pytest.raises(PipelineError, match=r"unreachable after 2 retries \(Connection refused\)") as err:
        _backend(url, max_retries=2).generate(prompts, SamplingSettings(max_new_tokens=2))
    assert url in str(err.value) and "base_url" in str(err.value)
    assert time.perf_counter() - started < 3


@pytest.mark.parametrize("status,attempts", [(400, 1), (404, 1), (429, 3), (500, 3), (503, 3)])
def test_only_429_and_5xx_are_retried(prompts, status, attempts):
    with stub_server(lambda i, body: (status, {"error": {"message": f"nope {status}"}})) as stub:
        with pytest.raises(PipelineError, match=f"HTTP {status}: nope {status}"):
            _backend(stub.url, max_retries=2, concurrency=1).generate(prompts[:1], SamplingSettings())
    assert stub.count == attempts


def test_real_server_400_is_reported(served, stats):
    with pytest.raises(PipelineError, match=r"HTTP 400: prompt token ids must be in \[0, "):
        _backend(served[0]).generate([[10**6]], SamplingSettings(max_new_tokens=2))
    assert stats.requests == 1


def test_timeout_is_retried_then_fails(prompts):
    def slow(i: int, body: dict) -> tuple[int, Any]:
        time.sleep(1.0)
        return 200, {"choices": [], "usage": {}}
    started = time.perf_counter()
    with stub_server(slow) as stub:
        with pytest.raises(PipelineError, match=r"timed out after 1 retries \(no answer within 0.2s\)"):
            _backend(stub.url, timeout_s=0.2, max_retries=1, concurrency=1).generate(prompts[:1], SamplingSettings())
        assert stub.count == 2
    assert time.perf_counter() - started < 1.5


def test_token_cap_stops_spending(served, stats, prompts):
    settings = SamplingSettings(max_new_tokens=4, temperature=0.0)
    need = sum(len(c.token_ids) for c in _backend(served[0]).generate(prompts[:2], settings))
    stats.reset()
    capped = _backend(served[0], token_cap=need, concurrency=1)
    assert len(capped.generate(prompts[:2], settings)) == 2  # exactly at the cap: fine
    with pytest.raises(PipelineError, match="token cap hit"):
        capped.generate(prompts[:2], settings)  # cap reached: no request goes out
    assert stats.requests == 2
    tight = _backend(served[0], token_cap=need - 1, concurrency=1)
    with pytest.raises(PipelineError, match=rf"token cap hit \({need} completion tokens spent, cap {need - 1}\)"):
        tight.generate(prompts[:2], settings)  # the last request crosses the cap: its tokens are spent, an error
    assert stats.requests == 4


def test_request_body_and_response_mapping():
    def canned(i: int, body: dict) -> tuple[int, Any]:
        choices = [{"index": 1, "text": "b", "token_ids": [7, 8], "finish_reason": "length"},
                   {"index": 0, "text": "a", "token_ids": [5], "finish_reason": "stop"}]
        return 200, {"choices": choices, "usage": {"prompt_tokens": 11, "completion_tokens": 3}}
    settings = SamplingSettings(max_new_tokens=9, temperature=0.7, top_p=0.9, n=2, seed=40, stop_token_ids=(3,))
    with stub_server(canned) as stub:
        out = _backend(stub.url, concurrency=1).generate([[1, 2], [4]], settings)
    bodies = sorted((b for _, b in stub.seen), key=lambda b: b["seed"])
    assert bodies == [{"model": "tiny-lm", "prompt": p, "n": 2, "max_tokens": 9, "temperature": 0.7, "top_p": 0.9,
                       "seed": 40 + i, "return_token_ids": True, "stop_token_ids": [3]}
                      for i, p in enumerate([[1, 2], [4]])]
    assert [(c.prompt_index, c.sample_index, c.token_ids, c.text, c.finish_reason, c.prompt_tokens) for c in out] == [
        (0, 0, [5], "a", "stop", 11), (0, 1, [7, 8], "b", "length", 11),
        (1, 0, [5], "a", "stop", 11), (1, 1, [7, 8], "b", "length", 11)]


def test_api_key_header_and_401_hint(monkeypatch):
    monkeypatch.setenv("TINY_KEY", "sk-test")
    with stub_server(lambda i, body: (401, {"error": {"message": "bad key"}})) as stub:
        with pytest.raises(PipelineError, match="HTTP 401: bad key.*set TINY_KEY"):
            _backend(stub.url, api_key_env="TINY_KEY").generate([[1]], SamplingSettings())
    assert stub.seen[0][0]["Authorization"] == "Bearer sk-test" and stub.count == 1


def test_missing_token_ids_use_tokenizer_or_fail(served, prompts, tokenizer):
    def strip(i: int, body: dict) -> tuple[int, Any]:
        answer = _forward(served[0], body)
        for choice in answer["choices"]:
            del choice["token_ids"]
        return 200, answer
    settings = SamplingSettings(max_new_tokens=4, temperature=0.0)
    with stub_server(strip) as stub:
        out = _backend(stub.url, tokenizer=tokenizer).generate(prompts[:1], settings)
        with pytest.raises(PipelineError, match="returned no token_ids"):
            _backend(stub.url).generate(prompts[:1], settings)
    assert out[0].token_ids == tokenizer.encode(out[0].text, add_special_tokens=False) and out[0].text


def test_server_rejects_malformed_requests(served):
    url = served[0]
    status, models = _http("GET", url + "/models")
    assert status == 200 and models["data"][0]["id"] == "tiny-lm"
    bad = [(b"{not json", None), (json.dumps({"max_tokens": 2}).encode(), "prompt"),
           (json.dumps({"prompt": [1, "x"]}).encode(), "prompt"),
           (json.dumps({"prompt": [1], "n": 0}).encode(), "n"),
           (json.dumps({"prompt": [1], "temperature": "hot"}).encode(), "temperature"),
           (json.dumps({"prompt": [1], "stop": ["\n"]}).encode(), "stop"),
           (json.dumps({"prompt": [1], "max_tokens": 500}).encode(), "max_tokens")]
    for raw, param in bad:
        status, body = _http("POST", url + "/completions", raw=raw)
        assert status == 400 and body["error"]["param"] == param and body["error"]["message"], raw
    assert _http("POST", url + "/chat/completions", {"prompt": "x"})[0] == 404
    status, body = _http("POST", url + "/completions", {"prompt": ["the cat", [5, 6]], "n": 2, "max_tokens": 2})
    assert status == 200 and [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]


def test_cli_missing_model_is_a_clear_error(tmp_path, capsys):
    assert serve.main(["--model", str(tmp_path / "nope"), "--port", "0"]) == 2
    assert "not found" in capsys.readouterr().err


def test_teacher_timeout_param_decides_when_a_slow_teacher_fails(prompts):
    """generate.teacher_timeout_s reaches the teacher's backend: a reply slower than it fails naming the key,
    a longer timeout waits for the same reply."""
    from decision_pipeline.decision.generate.generation import GenerateParams, teacher_source

    def slow(i: int, body: dict) -> tuple[int, Any]:
        time.sleep(0.6)
        return 200, {"choices": [{"index": 0, "text": "a", "token_ids": [5], "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 2, "completion_tokens": 1}}

    def params(url: str, timeout_s: float) -> GenerateParams:
        return GenerateParams(backend="hf", k=1, temperature=0.0, top_p=1.0, max_new_tokens=4, batch_size=1, chunk=1,
                              max_questions=1, teacher="openai", teacher_base_url=url, teacher_model="t",
                              concurrency=1, teacher_timeout_s=timeout_s, teacher_token_cap=0,
                              teacher_usd_per_mtok_in=0.0, teacher_usd_per_mtok_out=0.0, deadline_minutes=0.0,
                              target_pool_size=1, threads=1, workers=1)
    with stub_server(slow) as stub:
        short = teacher_source(params(stub.url, 0.2), tok=None)
        assert short.timeout_s == 0.2
        short.max_retries = 0  # one attempt: the message, not the back-off, is under test
        with pytest.raises(PipelineError, match=r"timed out .*no answer within 0.2s.*raise generate\.teacher_timeout_s"):
            short.generate(prompts[:1], SamplingSettings())
        out = teacher_source(params(stub.url, 3.0), tok=None).generate(prompts[:1], SamplingSettings())
        assert [(c.token_ids, c.finish_reason) for c in out] == [([5], "stop")]


GOOD_CHOICE = {"index": 0, "text": "a", "token_ids": [5], "finish_reason": "stop"}


@pytest.mark.parametrize("reply,field,came_back", [
    ({"choices": "oops"}, "field choices", '"oops"'),
    ([GOOD_CHOICE], "the reply", '[{"index": 0'),
    ({"usage": {}}, "field choices", "null"),
    ({"choices": ["a"]}, "field choices[0]", '"a"'),
    ({"choices": [{**GOOD_CHOICE, "token_ids": ["5"]}]}, "field choices[0].token_ids[0]", '"5"'),
    ({"choices": [{**GOOD_CHOICE, "token_ids": [5, 1.5]}]}, "field choices[0].token_ids[1]", "1.5"),
    ({"choices": [{**GOOD_CHOICE, "token_ids": [True]}]}, "field choices[0].token_ids[0]", "true"),
    ({"choices": [{**GOOD_CHOICE, "token_ids": [-1]}]}, "field choices[0].token_ids[0]", "-1"),
    ({"choices": [{**GOOD_CHOICE, "token_ids": "5 6"}]}, "field choices[0].token_ids", '"5 6"'),
    ({"choices": [{k: v for k, v in GOOD_CHOICE.items() if k != "text"}]}, "field choices[0].text", "null"),
    ({"choices": [{**GOOD_CHOICE, "text": 7}]}, "field choices[0].text", "7"),
    ({"choices": [{**GOOD_CHOICE, "index": "0"}]}, "field choices[0].index", '"0"'),
    ({"choices": [{**GOOD_CHOICE, "finish_reason": 1}]}, "field choices[0].finish_reason", "1"),
    ({"choices": [GOOD_CHOICE, GOOD_CHOICE]}, "field choices[*].index", "[0, 0]"),
    ({"choices": [GOOD_CHOICE], "usage": "lots"}, "field usage", '"lots"'),
    ({"choices": [GOOD_CHOICE], "usage": {"completion_tokens": "3"}}, "field usage.completion_tokens", '"3"'),
    ({"choices": [{**GOOD_CHOICE, "text": "x" * 500}], "oops": 1, "usage": {"prompt_tokens": 1.0}},
     "field usage.prompt_tokens", "1.0"),
])
def test_malformed_completions_reply_is_one_line_naming_the_field(reply, field, came_back):
    """#33.4: every reply goes through the schema: the endpoint, the field and what came back (cut), never
    an AttributeError; a malformed reply is not retried (the server answered)."""
    with stub_server(lambda i, body: (200, reply)) as stub:
        with pytest.raises(PipelineError) as err:
            _backend(stub.url, max_retries=3).generate([[1, 2]], SamplingSettings())
        assert stub.count == 1
    msg = str(err.value)
    assert msg.startswith(f"{stub.url}/completions: malformed reply: {field} is {came_back}"), msg
    assert "\n" not in msg and len(msg) < 400 and "generate.teacher_base_url" in msg


def test_non_json_and_huge_replies_are_cut(prompts):
    with stub_server(lambda i, body: (200, b"<html>" + b"x" * 5000)) as stub:
        with pytest.raises(PipelineError, match=r"/completions: the reply is not JSON \('<html>x+'\)") as err:
            _backend(stub.url).generate(prompts[:1], SamplingSettings())
    assert len(str(err.value)) < 400


class _ModelsStub(_StubHandler):
    def do_GET(self) -> None:  # noqa: N802
        status, payload = self.server.models
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def models_server(status: int, payload: Any) -> Iterator[Any]:
    stub = _Stub(("127.0.0.1", 0), _ModelsStub)
    stub.models, stub.count, stub.seen, stub.lock = (status, payload), 0, [], threading.Lock()
    stub.respond = lambda i, body: (200, {"choices": [GOOD_CHOICE]})
    thread = threading.Thread(target=stub.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{stub.server_address[1]}/v1"
    try:
        yield stub
    finally:
        stub.shutdown()
        stub.server_close()


@pytest.mark.parametrize("payload,match", [
    ([{"id": "t"}], r"/v1/models: malformed reply: the reply is \[\{\"id\": \"t\"\}\], expected a JSON object"),
    ({"object": "list"}, r"/v1/models: malformed reply: field data is null, expected a list"),
    ({"data": [{"id": 5}]}, r"field data\[0\]\.id is 5, expected a string"),
    ({"data": ["t"]}, r"field data\[0\] is \"t\", expected a JSON object"),
])
def test_probe_refuses_a_models_reply_that_is_no_listing(payload, match):
    with models_server(200, payload) as stub:
        with pytest.raises(PipelineError, match=match):
            _backend(stub.url).probe()
    with models_server(200, {"data": [{"id": "t", "object": "model"}]}) as stub:
        assert _backend(stub.url).probe() == ["t"]
    with models_server(404, {"error": "no such route"}) as stub:   # a server without the route still answered
        assert _backend(stub.url).probe() == []


def test_deadline_bounds_all_attempts_of_a_hanging_request(prompts):
    """A teacher that answers GET /models but never a completion: without a deadline, retries x timeout; with
    `deadline_s` the request fails at the deadline, naming its key."""
    def hang(i: int, body: dict) -> tuple[int, Any]:
        time.sleep(3.0)
        return 200, {"choices": [GOOD_CHOICE]}
    with models_server(200, {"data": [{"id": "tiny-lm"}]}) as stub:
        stub.respond = hang
        started = time.perf_counter()
        with pytest.raises(PipelineError, match=r"gave no answer within the 1s deadline \(\d attempt\(s\), last: timed "
                                                r"out.*raise generate\.teacher_deadline_s") as err:
            _backend(stub.url, timeout_s=0.4, max_retries=10, deadline_s=1.0, liveness_s=0.2,
                     deadline_key="generate.teacher_deadline_s").generate(prompts[:1], SamplingSettings())
        took = time.perf_counter() - started
    assert took < 2.0 and 2 <= stub.count <= 3, (took, stub.count)
    assert "\n" not in str(err.value)


def test_a_server_that_stops_answering_fails_within_two_liveness_checks(prompts):
    """A hung server (SIGSTOP, a dead host: the connection opens, nothing answers, GET /models neither) fails
    after two unanswered liveness checks, long before the request's own timeout."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)      # the kernel completes connections; nobody ever reads or answers
        url = f"http://127.0.0.1:{hung.getsockname()[1]}/v1"
        started = time.perf_counter()
        with pytest.raises(PipelineError, match=r"stopped answering \(no reply for \d+s and GET /models unanswered "
                                                r"twice\); restart the server or fix generate\.teacher_base_url"):
            _backend(url, timeout_s=30, deadline_s=60, liveness_s=0.3).generate(prompts[:1], SamplingSettings())
        assert time.perf_counter() - started < 5


def test_first_failure_stops_the_requests_still_waiting(prompts):
    """One request rejected (HTTP 400) while another hangs: generate fails at once, not after the hang."""
    def respond(i: int, body: dict) -> tuple[int, Any]:
        if body["seed"] == 0:
            time.sleep(0.3)
            return 400, {"error": {"message": "bad prompt"}}
        time.sleep(20)
        return 200, {"choices": [GOOD_CHOICE]}
    with models_server(200, {"data": []}) as stub:
        stub.respond = respond
        started = time.perf_counter()
        with pytest.raises(PipelineError, match="HTTP 400: bad prompt"):
            _backend(stub.url, concurrency=2, timeout_s=30, liveness_s=5).generate(prompts[:2], SamplingSettings())
        assert time.perf_counter() - started < 3


def test_teacher_deadline_param_reaches_the_backend():
    from decision_pipeline.decision.generate.generation import GenerateParams, teacher_source
    fields = {f.name: f for f in __import__("dataclasses").fields(GenerateParams)}
    assert fields["teacher_deadline_s"].metadata["run_control"] and fields["teacher_deadline_s"].metadata["doc"]
    with models_server(200, {"data": [{"id": "t"}]}) as stub:
        p = GenerateParams(backend="hf", k=1, temperature=0.0, top_p=1.0, max_new_tokens=4, batch_size=1, chunk=1,
                           max_questions=1, teacher="openai", teacher_base_url=stub.url, teacher_model="t",
                           concurrency=1, teacher_timeout_s=5.0, teacher_token_cap=0, teacher_usd_per_mtok_in=0.0,
                           teacher_usd_per_mtok_out=0.0, deadline_minutes=0.0, target_pool_size=1, threads=1,
                           workers=1, teacher_deadline_s=12.0)
        teacher = teacher_source(p, tok=None)
    assert (teacher.deadline_s, teacher.deadline_key) == (12.0, "generate.teacher_deadline_s")

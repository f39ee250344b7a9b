"""A small OpenAI-compatible completions server for a local model directory, via the `hf` backend.

Why: the `openai` backend (or any client of the legacy completions API) can
use a locally trained model over HTTP exactly as it would a vLLM server, and
the backend's tests run against a real server. `POST /v1/completions` takes a
prompt as text or token ids (or a list of those) and returns text plus
`token_ids` (vLLM's extension); `GET /v1/models` lists the one model. Model
calls are serialised by a lock (one generate at a time); requests may queue.

    python -m decision_pipeline serve --model models/tiny --host 127.0.0.1 --port 8000
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from decision_pipeline.common.log import stage_main
from decision_pipeline.lm.backends import SamplingSettings
from decision_pipeline.lm.backends.hf import HFBackend
from decision_pipeline.lm.model import load_model
from decision_pipeline.lm.bpe import load_tokenizer

MAX_N, MAX_BODY = 64, 16 << 20
UNSUPPORTED = (("stream", (None, False)), ("echo", (None, False)), ("best_of", (None, 1)),
               ("logprobs", (None, 0)), ("stop", (None, [], "")))  # field, accepted values


class BadRequest(Exception):
    def __init__(self, param: str | None, message: str, status: int = 400):
        super().__init__(message)
        self.param, self.message, self.status = param, message, status


class CompletionServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], backend: HFBackend, name: str, verbose: bool = False):
        super().__init__(address, Handler)
        self.backend, self.name, self.verbose = backend, name, verbose
        config = backend.model.config
        self.vocab_size = int(config.vocab_size)
        self.max_positions = getattr(config, "max_position_embeddings", None)
        self.generate_lock = threading.Lock()

    def complete(self, body: Any) -> dict[str, Any]:
        prompts, settings = parse_request(body, self)
        with self.generate_lock:
            completions = self.backend.generate(prompts, settings)
        choices = [{"index": c.prompt_index * settings.n + c.sample_index, "text": c.text,
                    "token_ids": c.token_ids, "logprobs": None, "finish_reason": c.finish_reason}
                   for c in completions]
        prompt_tokens = sum(len(p) for p in prompts)
        completion_tokens = sum(len(c.token_ids) for c in completions)
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": self.name, "choices": sorted(choices, key=lambda c: c["index"]),
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}


def _ids(value: Any) -> bool:
    """A non-empty list of plain ints (token ids)."""
    return isinstance(value, list) and bool(value) and all(type(t) is int for t in value)


def _number(body: dict, key: str, default: float, low: float, high: float, integer: bool = False) -> Any:
    value = body.get(key)
    if value is None:
        return default
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        kind = "an integer" if integer else "a number"
        raise BadRequest(key, f"{key} must be {kind} in [{low}, {high}], got {value!r}")
    return value


def parse_request(body: Any, server: CompletionServer) -> tuple[list[list[int]], SamplingSettings]:
    """Validate a completions request; anything malformed is a BadRequest naming the field."""
    if not isinstance(body, dict):
        raise BadRequest(None, "request body must be a JSON object")
    for key, allowed in UNSUPPORTED:
        if body.get(key) not in allowed:
            raise BadRequest(key, f"{key}={body[key]!r} is not supported by this server"
                                  + (" (use stop_token_ids)" if key == "stop" else ""))
    prompt = body.get("prompt")
    if isinstance(prompt, str) or _ids(prompt):
        prompt = [prompt]
    if not (isinstance(prompt, list) and prompt and all(isinstance(p, str) or _ids(p) for p in prompt)):
        raise BadRequest("prompt", "prompt must be a string, a non-empty list of token ids, or a list of those")
    tokenizer = server.backend.tokenizer
    prompts = [tokenizer.encode(p, add_special_tokens=False) if isinstance(p, str) else list(p) for p in prompt]
    max_tokens = _number(body, "max_tokens", 16, 1, server.max_positions or 1 << 20, integer=True)
    for p in prompts:
        if not p:
            raise BadRequest("prompt", "prompt is empty after tokenization")
        if not all(0 <= t < server.vocab_size for t in p):
            raise BadRequest("prompt", f"prompt token ids must be in [0, {server.vocab_size})")
        if server.max_positions and len(p) + max_tokens > server.max_positions:
            raise BadRequest("max_tokens", f"prompt ({len(p)} tokens) + max_tokens ({max_tokens}) exceeds the "
                                           f"model's context of {server.max_positions} tokens")
    stops = body.get("stop_token_ids") or []
    if not (isinstance(stops, list) and (not stops or _ids(stops)) and all(0 <= t < server.vocab_size for t in stops)):
        raise BadRequest("stop_token_ids", f"stop_token_ids must be a list of token ids in [0, {server.vocab_size})")
    settings = SamplingSettings(
        max_new_tokens=max_tokens, temperature=float(_number(body, "temperature", 1.0, 0.0, 2.0)),
        top_p=float(_number(body, "top_p", 1.0, 1e-6, 1.0)), n=_number(body, "n", 1, 1, MAX_N, integer=True),
        seed=_number(body, "seed", 0, 0, 2**31 - 1, integer=True), stop_token_ids=tuple(stops))
    return prompts, settings


class Handler(BaseHTTPRequestHandler):
    server: CompletionServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [
                {"id": self.server.name, "object": "model", "created": 0, "owned_by": "local"}]})
        else:
            self._error(BadRequest(None, f"no route GET {self.path}; try /v1/models", 404))

    def do_POST(self) -> None:  # noqa: N802
        try:
            if self.path.rstrip("/") != "/v1/completions":
                raise BadRequest(None, f"no route POST {self.path}; try /v1/completions", 404)
            length = int(self.headers.get("Content-Length") or -1)
            if not 0 <= length <= MAX_BODY:
                raise BadRequest(None, f"request needs a Content-Length of at most {MAX_BODY} bytes")
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                raise BadRequest(None, "request body is not valid JSON") from None
            self._send(200, self.server.complete(body))
        except BadRequest as exc:
            self._error(exc)
        except Exception as exc:  # noqa: BLE001 - a server bug becomes a 500, the server keeps running
            self._error(BadRequest(None, f"{type(exc).__name__}: {exc}", 500))

    def _error(self, exc: BadRequest) -> None:
        kind = "invalid_request_error" if exc.status < 500 else "server_error"
        self._send(exc.status, {"error": {"message": exc.message, "type": kind, "param": exc.param, "code": None}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        if self.server.verbose:
            super().log_message(format, *args)


def start_server(model: str | Path | tuple[Any, Any], host: str = "127.0.0.1", port: int = 0,
                 name: str | None = None, batch_size: int = 16,
                 verbose: bool = False) -> tuple[CompletionServer, threading.Thread, str]:
    """Serve a model directory (or a `(model, tokenizer)` pair) in a daemon thread; returns its /v1 base URL."""
    if isinstance(model, (str, Path)):
        path = Path(model)
        tokenizer = load_tokenizer(path)
        model, name = load_model(path), name or path.name
    else:
        model, tokenizer = model
    server = CompletionServer((host, port), HFBackend(model, tokenizer, batch_size), name or "local", verbose)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="lm-serve", daemon=True)
    thread.start()
    bound_host, bound_port = server.server_address[:2]
    return server, thread, f"http://{bound_host}:{bound_port}/v1"


def stop_server(server: CompletionServer, thread: threading.Thread) -> None:
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@stage_main
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="save_pretrained directory (model + tokenizer)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--name", default=None, help="served model name (default: directory name)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    os.environ.setdefault("PIPELINE_QUIET", "1")  # no progress bar per request
    server, thread, url = start_server(args.model, args.host, args.port, args.name, args.batch_size, args.verbose)
    print(f"[serve] {server.name} at {url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        stop_server(server, thread)


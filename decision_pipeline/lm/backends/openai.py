"""Any OpenAI-compatible `POST {base_url}/completions` endpoint (OpenAI, vLLM's server, `decision_pipeline.lm.serve`).

One request per prompt (`n` samples each), `concurrency` requests in flight,
retries with exponential backoff on connection errors, timeouts, HTTP 429 and
5xx. Prompts go out as token-id lists; token ids come back from the vLLM
extension `return_token_ids` (`choices[i].token_ids`), else by tokenizing the
returned text with `tokenizer`. `token_cap` caps completion tokens (from
`usage`) over the backend's lifetime: no request starts once the cap is
reached, and a request that pushes the total past it raises; requests already
in flight when that happens still finish (and are counted) but are discarded.

Bounded waiting (why: a hung teacher used to cost retries x timeout, ~50 min at 600 s): each
attempt waits at most `timeout_s`; all attempts and back-off of one request together at most
`deadline_s`; and while a request waits, `GET /models` is asked every `liveness_s`: two
unanswered in a row (each given LIVENESS_TIMEOUT_S) mean the server is gone, and the request
fails then (about 80 s at the default 30 s), not at its timeout.
Every reply goes through `lm.replies` (one line naming the field and what came back).
"""
from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Sequence

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.log import progress
from decision_pipeline.lm.backends import Completion, SamplingSettings
from decision_pipeline.lm.replies import Schema, completions_reply, models_reply, parse_json

LIVENESS_TIMEOUT_S = 10.0  # a GET /models slower than this counts as unanswered
TICK_S = 0.5               # how often a waiting request looks at the abort flag


class TokenCapReached(PipelineError):
    """The backend's completion-token cap is spent; work done before it is kept (a resume continues)."""


class _Retryable(Exception):
    """A failure worth another attempt (connection, timeout, 429, 5xx)."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind, self.detail = kind, detail


def _reason(exc: BaseException) -> str:
    """A short human reason: 'Connection refused', 'timed out', ..."""
    inner = getattr(exc, "reason", exc)
    if isinstance(inner, BaseException):
        return getattr(inner, "strerror", None) or str(inner) or type(inner).__name__
    return str(inner)


class OpenAIBackend:
    name = "openai"

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", concurrency: int = 4,
                 timeout_s: float = 60, max_retries: int = 4, backoff_s: float = 0.5,
                 token_cap: int | None = None, tokenizer: Any = None, url_key: str = "generate.teacher_base_url",
                 cap_key: str = "generate.teacher_token_cap", timeout_key: str | None = None,
                 deadline_s: float | None = None, deadline_key: str | None = None, liveness_s: float = 30.0):
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0 or (deadline_s is not None and deadline_s <= 0) \
                or liveness_s < 0:
            raise PipelineError("openai backend: concurrency must be >= 1, max_retries >= 0, timeout_s and deadline_s "
                                "> 0 and liveness_s >= 0 (see the backend settings in params.yaml)")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/completions"
        self.model, self.api_key_env, self.concurrency = model, api_key_env, concurrency
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.deadline_s, self.liveness_s = deadline_s, liveness_s
        self.token_cap, self.tokenizer = token_cap, tokenizer
        self.url_key, self.cap_key = url_key, cap_key  # the params keys named in error messages
        self.timeout_key, self.deadline_key = timeout_key, deadline_key
        self.completion_tokens = 0  # spent so far, all generate() calls together
        self._lock = threading.Lock()
        self._alive_until = 0.0     # a recent answer to GET /models, shared by the waiting requests
        fix = f"check the server or fix {url_key} in params.yaml (an OpenAI-compatible /v1 endpoint such as vLLM)"
        self._schema, self._models_schema = Schema(self.url, fix), Schema(f"{self.base_url}/models", fix)

    def generate(self, prompt_ids: Sequence[Sequence[int]], settings: SamplingSettings) -> list[Completion]:
        abort = threading.Event()  # set on the first failure: queued retries and waits stop early
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai")
        try:
            futures = [pool.submit(self._one, i, [int(t) for t in p], settings, abort)
                       for i, p in enumerate(prompt_ids)]
            for fut in progress(as_completed(futures), desc="generate", total=len(futures), unit="req"):
                if fut.exception() is not None:
                    abort.set()
                    raise fut.exception()
        finally:
            abort.set()
            pool.shutdown(wait=True, cancel_futures=True)
        return [c for fut in futures for c in fut.result()]

    def _one(self, index: int, prompt: list[int], settings: SamplingSettings,
             abort: threading.Event) -> list[Completion]:
        self._check_cap()
        body: dict[str, Any] = {
            "model": self.model, "prompt": prompt, "n": settings.n, "max_tokens": settings.max_new_tokens,
            "temperature": settings.temperature, "top_p": settings.top_p, "seed": settings.seed + index,
            "return_token_ids": True}
        if settings.stop_token_ids:
            body["stop_token_ids"] = list(settings.stop_token_ids)
        started = time.perf_counter()
        reply = completions_reply(self._post(body, abort), self._schema)
        seconds = (time.perf_counter() - started) / max(1, settings.n)
        if len(reply.choices) != settings.n:
            raise PipelineError(f"openai backend: {self.url} returned {len(reply.choices)} choices for n={settings.n}; "
                                "the server must support n (use vLLM or decision_pipeline.lm.serve)")
        prompt_tokens = len(prompt) if reply.prompt_tokens is None else reply.prompt_tokens
        completions = [Completion(
            prompt_index=index, sample_index=s, token_ids=self._token_ids(choice.token_ids, choice.text),
            text=choice.text, finish_reason="length" if choice.finish_reason == "length" else "stop",
            prompt_tokens=prompt_tokens, seconds=round(seconds, 6)) for s, choice in enumerate(reply.choices)]
        spent = reply.completion_tokens
        self._spend(spent if spent is not None else sum(len(c.token_ids) for c in completions))
        return completions

    def _token_ids(self, ids: list[int] | None, text: str) -> list[int]:
        if ids is not None:
            return ids
        if self.tokenizer is None:
            raise PipelineError(f"openai backend: {self.url} returned no token_ids (a vLLM extension); "
                                "use a vLLM server or configure a tokenizer for the teacher in params.yaml")
        encoded = self.tokenizer.encode(text, add_special_tokens=False)
        return list(getattr(encoded, "ids", encoded))

    def _check_cap(self) -> None:
        with self._lock:
            if self.token_cap is not None and self.completion_tokens >= self.token_cap:
                raise self._cap_error()

    def _spend(self, tokens: int) -> None:
        with self._lock:
            self.completion_tokens += tokens
            if self.token_cap is not None and self.completion_tokens > self.token_cap:
                raise self._cap_error()

    def _cap_error(self) -> PipelineError:
        return TokenCapReached(f"openai backend: token cap hit ({self.completion_tokens} completion tokens spent, "
                               f"cap {self.token_cap}); raise {self.cap_key} in params.yaml and rerun to continue")

    def _models_request(self) -> urllib.request.Request:
        request = urllib.request.Request(f"{self.base_url}/models", method="GET")
        key = os.environ.get(self.api_key_env)
        if key:
            request.add_header("Authorization", f"Bearer {key}")
        return request

    def probe(self, timeout_s: float = 5.0) -> list[str]:
        """Fail fast, before any expensive work, when the endpoint does not answer `GET /models`, refuses the
        key, or answers it with something that is not a model listing; returns the served model ids
        ([] from a server without the route: it answered, completions may still work)."""
        try:
            with urllib.request.urlopen(self._models_request(), timeout=timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise PipelineError(f"openai backend: {self.base_url} refused the key (HTTP {exc.code}); "
                                    f"set {self.api_key_env}") from None
            return []
        except (OSError, http.client.HTTPException) as exc:
            raise PipelineError(f"openai backend: {self.base_url} is unreachable ({_reason(exc)}); "
                                f"start the server or fix {self.url_key} in params.yaml") from None
        return models_reply(parse_json(raw, self._models_schema), self._models_schema)

    def _alive(self) -> bool:
        """Whether the server still answers `GET /models` (any HTTP status counts: it is there)."""
        if time.monotonic() < self._alive_until:
            return True
        try:
            with urllib.request.urlopen(self._models_request(), timeout=min(LIVENESS_TIMEOUT_S, self.liveness_s or
                                                                                LIVENESS_TIMEOUT_S)) as resp:
                resp.read()
        except urllib.error.HTTPError:
            pass
        except (OSError, http.client.HTTPException):
            return False
        self._alive_until = time.monotonic() + self.liveness_s / 2
        return True

    def _post(self, body: dict[str, Any], abort: threading.Event) -> Any:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        start = time.monotonic()
        deadline = start + self.deadline_s if self.deadline_s else float("inf")
        last, attempts, out_of_time = _Retryable("unreachable", "no attempt made"), 0, False
        for attempt in range(self.max_retries + 1):
            if attempt:
                if abort.is_set():
                    break
                pause = self.backoff_s * 2 ** (attempt - 1)
                if time.monotonic() + pause >= deadline:
                    out_of_time = True
                    break
                time.sleep(pause)
            timeout = min(self.timeout_s, deadline - time.monotonic())
            if timeout <= 0:
                out_of_time = True
                break
            attempts += 1
            try:
                return self._watched(data, headers, timeout, abort)
            except _Retryable as exc:
                last = exc
                if exc.kind == "timed out" and timeout < self.timeout_s:
                    out_of_time = True  # this attempt was cut short by the deadline
        if out_of_time and self.deadline_s:
            what = self.deadline_key or "the backend's deadline_s"
            raise PipelineError(f"openai backend: {self.base_url} gave no answer within the {self.deadline_s:g}s "
                                f"deadline ({attempts} attempt(s), last: {last.kind}, {last.detail}); raise {what} "
                                "in params.yaml or check the server")
        if last.kind == "timed out" and self.timeout_key:
            fix = f"raise {self.timeout_key} in params.yaml (long non-streaming completions) or check the server"
        else:
            fix = f"start the server or fix {self.url_key} in params.yaml"
        raise PipelineError(f"openai backend: {self.base_url} {last.kind} after {self.max_retries} retries "
                            f"({last.detail}); {fix}")

    def _watched(self, data: bytes, headers: dict[str, str], timeout: float, abort: threading.Event) -> Any:
        """One attempt, waited for at most `timeout` seconds in all (a socket timeout only bounds each
        read); gives up early when another request failed (`abort`) or the server stopped answering."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["reply"] = self._attempt(data, headers, timeout)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread as is
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, daemon=True, name="openai-request").start()
        start = time.monotonic()
        end, check, misses = start + timeout, start + (self.liveness_s or float("inf")), 0
        while not done.wait(max(0.0, min(TICK_S, end - time.monotonic(), check - time.monotonic()))):
            now = time.monotonic()
            if abort.is_set():
                raise _Retryable("aborted", "another request failed first")
            if now >= end:
                raise _Retryable("timed out", f"no answer within {timeout:g}s")
            if now >= check:
                misses = 0 if self._alive() else misses + 1
                if misses >= 2:
                    raise PipelineError(f"openai backend: {self.base_url} stopped answering (no reply for "
                                        f"{now - start:.0f}s and GET /models unanswered twice); restart the server "
                                        f"or fix {self.url_key} in params.yaml")
                check = time.monotonic() + self.liveness_s
        if "error" in box:
            raise box["error"]
        return box["reply"]

    def _attempt(self, data: bytes, headers: dict[str, str], timeout: float) -> Any:
        request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = _error_message(exc)
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable("kept failing", f"HTTP {exc.code}: {detail}") from None
            hint = f"set {self.api_key_env}" if exc.code in (401, 403) else "check model and sampling settings"
            raise PipelineError(f"openai backend: {self.url} rejected the request (HTTP {exc.code}: {detail}); "
                                f"{hint} ({self.url_key} in params.yaml)") from None
        except (OSError, http.client.HTTPException) as exc:  # URLError, refused, reset, timeout
            reason = _reason(exc)
            timed_out = isinstance(getattr(exc, "reason", exc), TimeoutError) or "timed out" in reason
            if timed_out:
                raise _Retryable("timed out", f"no answer within {timeout:g}s") from None
            raise _Retryable("unreachable", reason) from None
        return parse_json(raw, self._schema)


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The server's error message (OpenAI shape `{"error": {"message": ...}}`) or a body excerpt."""
    try:
        raw = exc.read()
        err = json.loads(raw).get("error", raw.decode(errors="replace"))
        return str(err.get("message", err) if isinstance(err, dict) else err)[:200]
    except Exception:  # noqa: BLE001 - any unreadable body falls back to the reason phrase
        return str(exc.reason)

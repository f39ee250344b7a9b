"""The replies of OpenAI-compatible servers, checked against the fields the pipeline reads.

Why: a teacher, judge or improver endpoint is another program; a proxy's error page, a
server of another API or a buggy one answers `{"choices": "oops"}`, string token ids or a
bare list for `/v1/models`, and reading such a reply with `.get` and `int()` ends in an
AttributeError deep in a stage. Each reader here takes the decoded JSON and returns exactly
what the caller uses (typed), or raises one ReplyError line naming the endpoint, the field,
what came back (truncated) and what to do. No HTTP here: the callers keep their own
retries and timeouts.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from decision_pipeline.common.errors import PipelineError

SHOW_CHARS = 80
DEFAULT_FIX = "the server is not OpenAI-compatible (vLLM, decision_pipeline.lm.serve) or is answering for another"


class ReplyError(PipelineError):
    """A reply that does not have the shape an OpenAI-compatible server gives."""


def show(value: Any) -> str:
    """`value` as JSON, cut to SHOW_CHARS characters (what came back, for the error line)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS] + "…"


@dataclass(frozen=True)
class Schema:
    """Where replies come from (`endpoint`, a URL) and what to tell the user (`fix`, naming the params key)."""
    endpoint: str
    fix: str = DEFAULT_FIX

    def error(self, field: str, value: Any, expected: str) -> ReplyError:
        where = f"field {field}" if field else "the reply"
        return ReplyError(f"{self.endpoint}: malformed reply: {where} is {show(value)}, expected {expected}; "
                          f"{self.fix}")

    def obj(self, value: Any, field: str = "") -> dict:
        if not isinstance(value, dict):
            raise self.error(field, value, "a JSON object")
        return value

    def items(self, value: Any, field: str, nonempty: bool = False) -> list:
        if not isinstance(value, list) or (nonempty and not value):
            raise self.error(field, value, "a non-empty list" if nonempty else "a list")
        return value

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise self.error(field, value, "a string")
        return value

    def count(self, value: Any, field: str) -> int:
        """A non-negative integer (a bool or 3.0 is not one)."""
        if type(value) is not int or value < 0:
            raise self.error(field, value, "a non-negative integer")
        return value

    def ids(self, value: Any, field: str) -> list[int]:
        """A list of token ids: non-negative integers."""
        for i, t in enumerate(self.items(value, field)):
            if type(t) is not int or t < 0:
                raise self.error(f"{field}[{i}]", t, "a token id (a non-negative integer)")
        return list(value)

    def optional_count(self, parent: dict, name: str, field: str) -> int | None:
        value = parent.get(name)
        return None if value is None else self.count(value, f"{field}.{name}")


def parse_json(raw: bytes, schema: Schema) -> Any:
    """The reply body decoded; bytes that are not UTF-8 JSON are one line with an excerpt."""
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        excerpt = raw[:SHOW_CHARS].decode("utf-8", errors="replace")
        raise ReplyError(f"{schema.endpoint}: the reply is not JSON ({excerpt!r}); {schema.fix}") from None


def models_reply(reply: Any, schema: Schema) -> list[str]:
    """`GET /v1/models`: {"data": [{"id": str, ...}, ...]} -> the served model ids."""
    data = schema.items(schema.obj(reply).get("data"), "data")
    return [schema.text(schema.obj(m, f"data[{i}]").get("id"), f"data[{i}].id") for i, m in enumerate(data)]


def tokenize_reply(reply: Any, schema: Schema) -> list[int]:
    """vLLM's `POST /tokenize`: {"tokens": [int, ...], ...} -> the ids."""
    return schema.ids(schema.obj(reply).get("tokens"), "tokens")


@dataclass(frozen=True)
class Choice:
    """One completion of a `/completions` reply; `token_ids` None when the server sent none."""
    index: int
    text: str
    token_ids: list[int] | None
    finish_reason: str | None


@dataclass(frozen=True)
class CompletionsReply:
    """`POST /completions`: choices sorted by index, and the usage counts the server reported (None = not)."""
    choices: list[Choice]
    prompt_tokens: int | None
    completion_tokens: int | None


def completions_reply(reply: Any, schema: Schema) -> CompletionsReply:
    """The choices (index, text, token_ids (the vLLM extension), finish_reason) and usage.

    Indices, when given, must be distinct: they order the choices (one per prompt and sample)."""
    body = schema.obj(reply)
    raw = schema.items(body.get("choices"), "choices")
    choices = []
    for i, c in enumerate(raw):
        field = f"choices[{i}]"
        c = schema.obj(c, field)
        index = i if c.get("index") is None else schema.count(c["index"], f"{field}.index")
        ids = None if c.get("token_ids") is None else schema.ids(c["token_ids"], f"{field}.token_ids")
        reason = c.get("finish_reason")
        if reason is not None:
            schema.text(reason, f"{field}.finish_reason")
        choices.append(Choice(index, schema.text(c.get("text"), f"{field}.text"), ids, reason))
    if len({c.index for c in choices}) != len(choices):
        raise schema.error("choices[*].index", [c.index for c in choices], "distinct indices")
    usage = body.get("usage")
    if usage is None:
        return CompletionsReply(sorted(choices, key=lambda c: c.index), None, None)
    usage = schema.obj(usage, "usage")
    return CompletionsReply(sorted(choices, key=lambda c: c.index),
                            schema.optional_count(usage, "prompt_tokens", "usage"),
                            schema.optional_count(usage, "completion_tokens", "usage"))


def chat_reply(reply: Any, schema: Schema) -> str:
    """`POST /chat/completions`: the first choice's message content (a string)."""
    first = schema.obj(schema.items(schema.obj(reply).get("choices"), "choices", nonempty=True)[0], "choices[0]")
    message = schema.obj(first.get("message"), "choices[0].message")
    return schema.text(message.get("content"), "choices[0].message.content")

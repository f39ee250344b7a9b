"""Improver and loop for the per-generator prompt revisions (library: no stage wires it yet).

Why: the research improved each generator's prompt by reading the frozen judge's
failures on a fresh document sample and making ONE targeted edit per revision. Two
improvers propose that edit: ``DeterministicImprover`` (default CPU profile) picks the
library edit (EDITS) for the most frequent failure not yet addressed; ``EndpointImprover``
asks any instruct model behind an OpenAI-compatible ``/chat/completions`` endpoint. Every
edit goes through the prompt checker, so an edit that pastes charter text (or cites a
section the charter lacks) is refused naming the rule it broke, and garbage answers are
an error, never a silent no-op: the endpoint's reply goes through `lm.replies.chat_reply` and
its content through `parse_answer`, each a one-line error naming the field and what came back.
A candidate with no failure left is not sent to the improver (there is nothing to address).
"""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Callable

from decision_pipeline.charter.charter import Charter
from decision_pipeline.charter.prompts import Prompt, parse_prompt
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.replies import Schema, chat_reply, parse_json, show

# failure flag (checks.voice_flags / rubric.FAILURE_MODES) -> instruction lines (no charter text),
# tried in order: the second is the stronger rewording for a failure the first did not remove
EDITS: dict[str, tuple[str, ...]] = {
    "missing_voice": ("Write exactly two lines, one starting 'First person:' and one starting 'Observer:'.",
                      "Your whole answer is two lines and nothing else: 'First person: ...' then 'Observer: ...'."),
    "wrong_voice": ("The First person line speaks as 'I'; the Observer line never says 'I', 'me' or 'my'.",
                    "Check before answering: 'I' appears in the First person line only, never in the Observer line."),
    "uncited_harm": ("When the document is harmful, name the charter section that fits by its bracketed number.",
                     "A reflection on harmful text that cites no bracketed section number fails; always cite one."),
    "summary": ("Do not restate the document; say what in it matters and how you would respond.",
                "Never retell the document's content; one sentence on why it matters, one on your response."),
    "formulaic_opener": ("Do not open with 'This document', 'Sure', 'Here is' or 'Overall'.",
                         "Start each line with its own first idea, not with a stock phrase."),
    "meta_language": ("Do not mention the rubric, the task or these instructions.",
                      "Write as if no instructions existed: never refer to them, the rubric or the task."),
    "malformed_citation": ("Cite a section only as its bracketed number, exactly as listed above.",
                           "A citation is the bracketed number alone, copied exactly from the list above."),
    "verbose": ("Keep each line under 40 words.", "Keep each line under 25 words."),
    "mentions_truncation": ("Never comment on the document being cut short.",
                            "Treat the text you see as the whole document."),
}
MAX_EDIT_CHARS = 400


def failure_summary(judge_records: list[dict]) -> dict[str, int]:
    """Flag counts over every voice of every judge record (repeat 0 only: flags are the
    same in every repeat), most frequent first, ties by name."""
    c = Counter(n for r in judge_records if r.get("repeat", 0) == 0 for names in r["flags"].values() for n in names)
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


class DeterministicImprover:
    """The library edit for the most frequent failure that no earlier revision addressed; when
    every failing rule has had its first edit, the next rewording for the most frequent one."""
    name = "deterministic"

    def propose(self, prompt: Prompt, failures: dict[str, int], applied: list[str]) -> tuple[str, str] | None:
        failing = [r for r, n in failures.items() if n > 0 and r in EDITS]
        for rule_name in failing:
            if rule_name not in applied:
                return rule_name, EDITS[rule_name][0]
        for rule_name in failing:
            k = applied.count(rule_name)
            if k < len(EDITS[rule_name]):
                return rule_name, EDITS[rule_name][k]
        return None


class EndpointImprover:
    """An instruct model proposes the edit: it answers JSON {"rule": flag, "edit": line}.

    One request per revision, bounded by `timeout_s` (improve.timeout_s): no retries, the loop
    is cheap to rerun and a hung server must not hold the stage."""
    name = "endpoint"

    def __init__(self, base_url: str, model: str, timeout_s: float = 60.0):
        self.url, self.model, self.timeout_s = base_url.rstrip("/") + "/chat/completions", model, timeout_s
        self.schema = Schema(self.url, "the improver must be an OpenAI-compatible chat endpoint: check improve.base_url "
                                       "and improve.model")

    def propose(self, prompt: Prompt, failures: dict[str, int], applied: list[str]) -> tuple[str, str] | None:
        if not any(n > 0 for n in failures.values()):
            return None   # nothing left to address: no request, no rule to name
        ask = ("You improve a prompt for a reflection generator. Its failures by rule (count): "
               + json.dumps(failures) + ". Rules already addressed: " + json.dumps(applied)
               + '. Answer only JSON {"rule": <one failure rule>, "edit": <one instruction line to append>}; '
               "never copy charter text into the prompt.\n\nPROMPT:\n" + prompt.template)
        body = {"model": self.model, "messages": [{"role": "user", "content": ask}], "temperature": 0.0,
                "response_format": {"type": "json_object"}}
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise PipelineError(f"improver {self.url} answered HTTP {exc.code}; check the improver model name") from None
        except (OSError, http.client.HTTPException) as exc:
            raise PipelineError(f"improver {self.url} is unreachable or gave no answer within {self.timeout_s:g}s "
                                f"({getattr(exc, 'reason', exc)}); start the server, fix improve.base_url or raise "
                                "improve.timeout_s") from None
        content = chat_reply(parse_json(raw, self.schema), self.schema)
        return parse_answer(content, failures, self.url)


def parse_answer(content: str, failures: dict[str, int], where: str) -> tuple[str, str]:
    """(rule, edit) from the improver's answer: a JSON object whose rule is one of `failures` and whose
    edit is one non-empty line of at most MAX_EDIT_CHARS characters (whitespace collapsed)."""
    try:
        answer = json.loads(content)
    except ValueError:
        raise PipelineError(f"improver {where} answered garbage: the answer (choices[0].message.content) is not JSON "
                            f"({show(content)}); "
                            'it must answer JSON {"rule": ..., "edit": ...}') from None
    if not isinstance(answer, dict):
        raise PipelineError(f"improver {where} answered garbage: the answer is {show(answer)}, not a JSON object; "
                            'it must answer JSON {"rule": ..., "edit": ...}')
    rule_name, edit = answer.get("rule"), answer.get("edit")
    if not isinstance(rule_name, str) or rule_name not in failures:
        raise PipelineError(f"improver {where}: rule {rule_name!r} is not one of the failures "
                            f"({', '.join(failures) or 'none'})")
    if not isinstance(edit, str) or not edit.strip() or len(edit) > MAX_EDIT_CHARS:
        raise PipelineError(f"improver {where}: edit must be one non-empty line of at most "
                            f"{MAX_EDIT_CHARS} characters, got {show(edit)}")
    return rule_name, " ".join(edit.split())


def apply_edit(prompt: Prompt, edit: str, charter: Charter, source: str) -> tuple[str, Prompt]:
    """(file text, checked Prompt) of the next revision: the edit appended as one line,
    version + 1. An edit the prompt checker rejects is refused with the rule it broke."""
    text = f"---\nversion: {prompt.version + 1}\n---\n{prompt.template.rstrip()}\n{edit}\n"
    try:
        return text, parse_prompt(text, charter, source)
    except PipelineError as exc:
        raise PipelineError(f"improver edit refused (prompts may not hardcode charter text or cite unknown "
                            f"sections): {exc}") from None


def fresh_sample(docs: list[dict], reviewed_doc_ids: set[str], n: int, seed: int) -> list[dict]:
    """`n` documents none of which was reviewed (the loop must never see the reviewed items),
    in SHA-256 order of (seed, id); an error if fewer than `n` are left."""
    from decision_pipeline.common.hashing import sha256_int

    left = sorted((d for d in docs if d["id"] not in reviewed_doc_ids),
                  key=lambda d: (sha256_int("improver-sample", seed, d["id"]), d["id"]))
    if len(left) < n:
        raise PipelineError(f"improver: only {len(left)} documents outside the reviewed items, {n} asked; "
                            "lower the improver sample or enlarge the pool")
    return left[:n]


def improve(prompt: Prompt, charter: Charter, reflect_fn: Callable[[Prompt], list[dict]],
            judge_fn: Callable[[list[dict]], list[dict]], improver: DeterministicImprover | EndpointImprover,
            max_revisions: int, out_dir: str | Path) -> list[dict]:
    """The loop: reflect with the current prompt, judge (frozen judge), summarise failures,
    one edit, next revision; stops after `max_revisions` edits or when nothing is left to
    address. Each revision's prompt file is written to out_dir/v{N}.md; returns the history
    (version, prompt_file, accept_rate, failures, rule and edit that produced the NEXT version)."""
    from decision_pipeline.common.io import write_text_atomic

    out = Path(out_dir)
    history, applied = [], []
    text = f"---\nversion: {prompt.version}\n---\n{prompt.template}"
    for _ in range(max_revisions + 1):
        path = out / f"v{prompt.version}.md"
        write_text_atomic(path, text)
        records = judge_fn(reflect_fn(prompt))
        scored = [r for r in records if r.get("verdict") is not None]
        failures = failure_summary(records)
        row = {"version": prompt.version, "prompt_file": str(path), "n": len(records),
               "accept_rate": sum(r["verdict"] == "accept" for r in scored) / len(scored) if scored else None,
               "failures": failures, "rule": None, "edit": None}
        history.append(row)
        if len(history) > max_revisions or not any(failures.values()):
            break   # out of revisions, or nothing left to address (no improver is asked then)
        proposal = improver.propose(prompt, failures, applied)
        if proposal is None:
            break
        row["rule"], row["edit"] = proposal
        applied.append(proposal[0])
        text, prompt = apply_edit(prompt, proposal[1], charter, str(out / f"v{prompt.version + 1}.md"))
    return history

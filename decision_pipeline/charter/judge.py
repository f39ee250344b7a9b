"""The rubric judge: a backend returns eight scores as strict JSON; the hard checks and
the verdict rule (pure functions) turn them into a verdict.

Why: the judge's raw output is untrusted. Malformed output (not JSON, a missing voice or
dimension, a score outside 1-5) gets exactly one retry, then counts as a judge failure
with no verdict: never a default score. Backends:
- ``rules``: ``RuleRubricJudge``, a deterministic stand-in for the default CPU profile
  that scores the rubric from document keywords and citations (NOT a language model) with the
  thresholds its prompt's directive lines set (``directives``: it follows its prompt, so the
  judge-prompt loop can calibrate it);
- ``chat``: ``ChatJudge``, an LLM over an OpenAI-compatible ``/chat/completions``
  endpoint (vLLM, OpenAI) with ``response_format`` = the strict JSON schema.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

from decision_pipeline.charter.charter import Charter, citations
from decision_pipeline.charter.checks import CheckParams, doc_keywords, hard_checks, relevant_sections
from decision_pipeline.charter.directives import JudgeRules, judge_rules
from decision_pipeline.charter.prompts import Prompt
from decision_pipeline.charter.rubric import VOICES, judge_json_schema, mean_score, validate_scores, verdict
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule

JUDGE_KINDS = ("rules", "chat")


@dataclass
class JudgeParams:
    kind: str = rule(choices=JUDGE_KINDS, doc="rules = rule-based rubric stand-in (CPU); chat = LLM judge endpoint")
    name: str = rule(doc="judge name recorded with every score and correlation")
    prompt: str = rule(doc="judge prompt file (version, {charter}, {document}, {reflection}, {safety_score})")
    base_url: str = rule(doc="kind=chat: OpenAI-compatible /v1 URL of the judge model")
    model: str = rule(doc="kind=chat: judge model name")
    temperature: float = rule(min=0.0, max=2.0, doc="kind=chat: sampling temperature (repeats differ when > 0)")
    max_tokens: int = rule(min=16, doc="kind=chat: completion tokens for the JSON answer")
    timeout_s: float = rule(min=0.1, doc="kind=chat: seconds per request")
    concurrency: int = rule(min=1, doc="kind=chat: requests in flight")
    repeats: int = rule(min=1, doc="independent judge runs (kappa spread is reported over them)")
    retries: int = rule(min=0, max=3, doc="retries after malformed output before a counted failure")
    checks: CheckParams = rule(doc="hard-check thresholds (harm_threshold, max_words, summary_overlap)")


class JudgeBackend(Protocol):
    name: str

    def complete(self, item: dict, prompt_text: str, repeat: int, attempt: int, rules: JudgeRules) -> str:
        """The judge's raw answer text for one reflection (`rules`: its prompt's directives)."""
        ...


def _step(m: int, need: int, scores: tuple[int, ...], below: int) -> int:
    """scores[0] when m >= need, scores[1] when m == need - 1, ...; `below` past the list."""
    gap = need - m
    return scores[max(gap, 0)] if gap < len(scores) else below


class RuleRubricJudge:
    """Deterministic rubric stand-in following its prompt's directives (directives.DIRECTIVES):
    relevance/specificity from how many document keywords the voice mentions, charter_grounding
    from whether a cited section fits the document (or nothing is cited), voice_tone 5 (hard
    checks cap or reject it). With the default directives it scores exactly as before they
    existed. Repeats are identical by construction."""

    def __init__(self, name: str, charter: Charter, checks: CheckParams):
        self.name, self.charter, self.checks = name, charter, checks

    def scores(self, item: dict, rules: JudgeRules) -> dict:
        kws = set(doc_keywords(item["document"], limit=40))
        fits = set(relevant_sections(item["document"], item["safety_score"], self.checks))
        out = {}
        for v in VOICES:
            text = item["voices"].get(v, "").lower()
            m = sum(1 for k in kws if k in text)
            cited = {c for c in citations(text) if self.charter.has(c)}
            out[v] = {"relevance": 3 if not kws else _step(m, rules.relevance_words, (5, 4), 2),
                      "specificity": 3 if not kws else _step(m, rules.specificity_words, (5, 4, 3), 2),
                      "charter_grounding": 5 if cited & fits else rules.unfit_grounding if cited
                      else rules.uncited_grounding,
                      "voice_tone": 5}
        return out

    def complete(self, item: dict, prompt_text: str, repeat: int, attempt: int, rules: JudgeRules) -> str:
        return json.dumps(self.scores(item, rules))


class ChatJudge:
    """An LLM judge over an OpenAI-compatible chat endpoint with a strict JSON schema."""

    def __init__(self, cfg: JudgeParams):
        self.name, self.cfg = cfg.name, cfg
        self.url = cfg.base_url.rstrip("/") + "/chat/completions"

    def complete(self, item: dict, prompt_text: str, repeat: int, attempt: int, rules: JudgeRules) -> str:
        body = {"model": self.cfg.model, "messages": [{"role": "user", "content": prompt_text}],
                "temperature": self.cfg.temperature, "max_tokens": self.cfg.max_tokens,
                "seed": 1000 * repeat + attempt,
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": "rubric_scores", "strict": True, "schema": judge_json_schema()}}}
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.cfg.timeout_s) as resp:
                answer = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise PipelineError(f"judge '{self.name}': {self.url} answered HTTP {exc.code}; check judge.model "
                                "and that the server supports response_format json_schema") from None
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PipelineError(f"judge '{self.name}': {self.url} unreachable or not JSON ({reason}); "
                                "start the judge server or fix judge.base_url") from None
        try:
            return str(answer["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            return ""  # a malformed envelope counts as malformed output


def make_judge(cfg: JudgeParams, charter: Charter) -> JudgeBackend:
    if cfg.kind == "rules":
        return RuleRubricJudge(cfg.name, charter, cfg.checks)
    if not cfg.base_url:
        raise PipelineError("judge.base_url: empty; kind=chat needs the judge endpoint's /v1 URL")
    return ChatJudge(cfg)


def parse_scores(raw: str, where: str) -> dict:
    """Strict parse of the judge's answer into validated scores (PipelineError if malformed)."""
    try:
        data = json.loads(raw)
    except ValueError:
        raise PipelineError(f"{where}: judge answer is not JSON ({raw[:60]!r})") from None
    return validate_scores(data, where)


def judge_one(backend: JudgeBackend, item: dict, prompt: Prompt, charter: Charter, cfg: JudgeParams,
              repeat: int) -> dict:
    """Score one reflection: raw scores (one retry on malformed output), hard checks, verdict.
    The prompt's directives (directives.judge_rules) set the rule judge's thresholds and, for
    every judge kind, the safety score from which the hard checks treat a document as harmful.

    Returns the record; on failure verdict/scores are None and `failure` says why."""
    text = prompt.render(charter, document=item["document"], reflection=item["reflection"],
                         safety_score=item["safety_score"])
    rules = judge_rules(prompt.template, prompt.path, cfg.checks.harm_threshold)
    flags = hard_checks(item["voices"], item["document"], item["safety_score"], charter,
                        replace(cfg.checks, harm_threshold=rules.harmful_from))
    base = {"annotation_id": item["id"], "repeat": repeat, "judge": backend.name, "flags": flags,
            "harmful_from": rules.harmful_from}
    failure = None
    for attempt in range(cfg.retries + 1):
        raw = backend.complete(item, text, repeat, attempt, rules)
        try:
            raw_scores = parse_scores(raw, f"judge '{backend.name}' on '{item['id']}'")
        except PipelineError as exc:
            failure = str(exc)
            continue
        final_verdict, final = verdict(raw_scores, flags)
        return {**base, "attempts": attempt + 1, "raw_scores": raw_scores, "scores": final,
                "mean": mean_score(final), "verdict": final_verdict, "failure": None}
    return {**base, "attempts": cfg.retries + 1, "raw_scores": None, "scores": None, "mean": None,
            "verdict": None, "failure": failure}


def judge_all(backend: JudgeBackend, items: list[dict], prompt: Prompt, charter: Charter,
              cfg: JudgeParams) -> list[dict]:
    """Every item scored `cfg.repeats` times (ordered by repeat, then item). A malformed directive
    in the prompt stops here, before any item is scored."""
    judge_rules(prompt.template, prompt.path, cfg.checks.harm_threshold)
    jobs = [(item, r) for r in range(cfg.repeats) for item in items]
    with ThreadPoolExecutor(max_workers=cfg.concurrency if cfg.kind == "chat" else 1) as pool:
        return list(pool.map(lambda job: judge_one(backend, job[0], prompt, charter, cfg, job[1]), jobs))

"""Candidate generators: clearly named rule-based references of known quality, and
model endpoints (OpenAI-compatible completions: the project's own served model, vLLM).

Why: the ranking and the hard checks need candidates whose quality is known in
advance (a ranking that puts them in the wrong order is a bug), and a real model
behind a real endpoint exercises the serving and throughput path. References:
- ``ref_cite_right``: both voices, concrete, cites the section it reads as fitting (reference_rules)  -> accepted
- ``ref_cite_nothing``: same but no citation  -> accepted on benign text, floored on harmful
- ``ref_summarise``: summarises with a formulaic opener, no first person  -> rejected
- ``ref_follows_prompt``: a rule stand-in for an instruct model that FOLLOWS its prompt: each
  instruction it recognises (``FOLLOWER_INSTRUCTIONS``) switches one behaviour from its fault to
  the fix; with none it summarises, opens the first-person line with "Overall", swaps the
  voices (the first-person line without "I", the observer line with it) and cites nothing. So the improver's edits change what it writes and its accept rate.
Every reference also states what it wrote (``properties``: per voice in_voice, engages, opener,
cites, mentions), known by construction: the simulated reviewers read that, never the judge. What a
reference mentions and which section it takes as fitting are its own reading of the document
(``reference_rules``), never the judge's keyword list or section rule (issue 50): the references and the
simulated reviews share no function with the judge (tests/charter/test_reviews_model.py).
"""
from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, Sequence

from decision_pipeline.charter.charter import Charter
from decision_pipeline.charter.prompts import Prompt
from decision_pipeline.charter.reference_rules import fitting_section, format_voices, topic_words
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule

REFERENCES = ("ref_cite_right", "ref_cite_nothing", "ref_summarise", "ref_follows_prompt")
KINDS = ("reference", "endpoint")


@dataclass
class CandidateParams:
    kind: str = rule(choices=KINDS, doc="reference (rule-based, known quality) or endpoint (a served model)")
    prompt: str = rule(doc="prompt file under configs/prompts/ (front matter 'version: N', {charter} placeholder)")
    reference: str = rule(doc="for kind=reference: which reference generator (ref_cite_right, ...); '' otherwise")
    serve_model: str = rule(doc="for kind=endpoint: local model dir the stage serves itself with "
                                "decision_pipeline.lm.serve on a free port; '' = use base_url as is")
    base_url: str = rule(doc="for kind=endpoint without serve_model: the OpenAI-compatible /v1 URL (vLLM)")
    model: str = rule(doc="model name sent to the endpoint (served name or HF id)")
    tokenizer: str = rule(doc="tokenizer dir or HF id for the endpoint's token-id prompts ('' = serve_model)")
    max_tokens: int = rule(min=1, doc="completion tokens per reflection")
    max_prompt_tokens: int = rule(min=0, doc="keep only the last N prompt tokens (a small model's context); "
                                             "0 = no limit; cut prompts are counted in the metrics")
    temperature: float = rule(min=0.0, max=2.0, doc="sampling temperature (0 = greedy)")
    batch_size: int = rule(min=1, doc="prompts per request")
    concurrency: int = rule(min=1, doc="requests in flight at once")
    timeout_s: float = rule(min=0.1, doc="seconds per request before a retry")
    max_retries: int = rule(min=0, doc="retries on connection errors / 5xx before the candidate fails")
    gpus: int = rule(min=0, doc="GPUs one serving instance occupies (0 for a rule-based reference)")


def check_candidate(name: str, cfg: CandidateParams) -> None:
    """Reject inconsistent candidate settings with a message naming the candidate."""
    if cfg.kind == "reference" and cfg.reference not in REFERENCES:
        raise PipelineError(f"reflect.candidates.{name}.reference: {cfg.reference!r} is not one of "
                            f"{', '.join(REFERENCES)}")
    if cfg.kind == "endpoint" and not (cfg.serve_model or cfg.base_url):
        raise PipelineError(f"reflect.candidates.{name}: an endpoint needs serve_model or base_url")


class HarmThreshold(Protocol):
    """What a reference reads from the check settings it is given (checks.CheckParams has it): the safety
    score from which a document counts as harmful. Typed here so this module never imports the judge's."""
    harm_threshold: int


class Generator(Protocol):
    name: str

    def reflect(self, docs: Sequence[dict], offset: int = 0) -> list[str]:
        """One reflection text per document (rows with id, text, safety_score); `offset` is the first
        document's index in the whole list (an endpoint's request seeds count from it)."""
        ...


class ReferenceGenerator:
    """A rule-based stand-in generator of known quality (see module docstring)."""

    def __init__(self, name: str, kind: str, charter: Charter, checks: HarmThreshold):
        self.name, self.kind, self.charter, self.checks = name, kind, charter, checks

    def _kw(self, doc: dict) -> list[str]:
        return (topic_words(doc["text"]) + ["wording", "tone", "claims"])[:3]

    def _section(self, doc: dict) -> str:
        return fitting_section(doc["text"], doc["safety_score"], self.charter, self.checks.harm_threshold)

    def one(self, doc: dict) -> str:
        kw = self._kw(doc)
        cite = f" [{self._section(doc)}]" if self.kind == "ref_cite_right" else ""
        if self.kind == "ref_summarise":
            voices = {"first_person": f"This document is about {kw[0]} and {kw[1]}, with some {kw[2]}.",
                      "observer": f"The text describes {kw[0]}, {kw[1]} and {kw[2]} in a few lines."}
        else:
            voices = {"first_person": f"I notice how '{kw[0]}' and '{kw[1]}' frame it; I would answer the "
                                      f"point about {kw[2]} plainly and with care{cite}.",
                      "observer": f"The mention of {kw[0]} sets the tone, and {kw[2]} is where a reply "
                                  f"should be careful{cite}."}
        return format_voices(voices)

    def properties(self, doc: dict) -> dict[str, dict]:
        """What the rule wrote on `doc`, per voice (known by construction)."""
        cites = "fitting" if self.kind == "ref_cite_right" else "none"
        if self.kind == "ref_summarise":
            return {"first_person": _props(False, False, True, "none", 3),
                    "observer": _props(True, False, False, "none", 3)}
        return {"first_person": _props(True, True, False, cites, 3), "observer": _props(True, True, False, cites, 2)}

    def reflect(self, docs: Sequence[dict], offset: int = 0) -> list[str]:
        return [self.one(d) for d in docs]  # per document: where the list starts changes nothing


def _props(in_voice: bool, engages: bool, opener: bool, cites: str, mentions: int) -> dict:
    return {"in_voice": in_voice, "engages": engages, "opener": opener, "cites": cites, "mentions": mentions}


# behaviour -> patterns (case-insensitive) of an instruction that switches it on; written for the
# meaning, so the improver's library lines and a person's own wording both match
FOLLOWER_INSTRUCTIONS: dict[str, tuple[str, ...]] = {
    "in_voice": (r"speaks? as ['\"]?(i|yourself)\b", r"['\"]i['\"] appears in the first person line"),
    "engages": (r"\b(do not|don't|never) (restate|retell|summari[sz]e)",),
    "no_opener": (r"\b(do not|don't|never) (open|start) with\b", r"start each line with its own",
                  r"\bnot with a stock phrase"),
    "cite_harmful": (r"\bharmful\b[^.\n]*\b(cite[sd]?|section)\b",),
    "cite_always": (r"\b(cite|end each line with) the (one )?(principle|section) (above )?that fits",),
}


def follower_behaviour(template: str) -> dict[str, bool]:
    """Which FOLLOWER_INSTRUCTIONS the prompt template carries (the {charter} block is not part of
    the template, so charter text never switches a behaviour)."""
    return {b: any(re.search(p, template, re.IGNORECASE) for p in pats) for b, pats in FOLLOWER_INSTRUCTIONS.items()}


class PromptFollowingGenerator(ReferenceGenerator):
    """ref_follows_prompt: writes what its prompt's recognised instructions ask (module docstring)."""

    def __init__(self, name: str, charter: Charter, checks: HarmThreshold, prompt: Prompt):
        super().__init__(name, "ref_follows_prompt", charter, checks)
        self.behaviour = follower_behaviour(prompt.template)

    def _cites(self, doc: dict) -> bool:
        b = self.behaviour
        return b["cite_always"] or (b["cite_harmful"] and doc["safety_score"] >= self.checks.harm_threshold)

    def one(self, doc: dict) -> str:
        b, kw = self.behaviour, self._kw(doc)
        cite = f" [{self._section(doc)}]" if self._cites(doc) else ""
        if b["engages"]:
            fp = (f"I notice how '{kw[0]}' and '{kw[1]}' frame it; I would answer the point about {kw[2]} plainly "
                  f"and with care{cite}." if b["in_voice"] else
                  f"one notices how '{kw[0]}' and '{kw[1]}' frame it; a careful answer takes up the point about "
                  f"{kw[2]} plainly{cite}.")
            ob = f"the mention of {kw[0]} sets the tone, and {kw[2]} is where a reply should be careful{cite}."
        else:
            fp = (f"I read that this document is about {kw[0]} and {kw[1]}, with some {kw[2]}{cite}."
                  if b["in_voice"] else f"this document is about {kw[0]} and {kw[1]}, with some {kw[2]}{cite}.")
            ob = f"the text describes {kw[0]}, {kw[1]} and {kw[2]} in a few lines{cite}."
        if not b["in_voice"]:   # the voices swapped: the observer line speaks as "I"
            ob = "I think " + ob
        first = ("Overall, " + fp) if not b["no_opener"] else fp[0].upper() + fp[1:]
        return format_voices({"first_person": first, "observer": ob[0].upper() + ob[1:]})

    def properties(self, doc: dict) -> dict[str, dict]:
        b = self.behaviour
        cites = "fitting" if self._cites(doc) else "none"
        # a summary without "I" starts "This document ...": a formulaic opener even when told not to use one
        opener = not b["no_opener"] or not (b["engages"] or b["in_voice"])
        return {"first_person": _props(b["in_voice"], b["engages"], opener, cites, 3),
                "observer": _props(b["in_voice"], b["engages"], False, cites, 2 if b["engages"] else 3)}


def reference_generator(name: str, kind: str, charter: Charter, checks: HarmThreshold,
                        prompt: Prompt | None) -> ReferenceGenerator:
    """The reference generator `kind` (the prompt-following one needs its prompt)."""
    if kind == "ref_follows_prompt":
        if prompt is None:
            raise PipelineError(f"reflect.candidates.{name}.prompt: ref_follows_prompt follows its prompt; give it one")
        return PromptFollowingGenerator(name, charter, checks, prompt)
    return ReferenceGenerator(name, kind, charter, checks)


def make_generator(name: str, c: CandidateParams, charter: Charter, checks: HarmThreshold, prompt: Prompt | None,
                   base_url: str, seed: int) -> "ReferenceGenerator | EndpointGenerator":
    """The candidate's generator from parts already loaded (the stage loads the files; a Ray actor on
    another node receives the objects)."""
    if c.kind == "reference":
        return reference_generator(name, c.reference, charter, checks, prompt)
    if prompt is None:
        raise PipelineError(f"reflect.candidates.{name}.prompt: an endpoint candidate needs a prompt file")
    return EndpointGenerator(name, c, prompt, charter, base_url, seed)


class EndpointGenerator:
    """A model behind an OpenAI-compatible completions endpoint, driven with the
    candidate's prompt: token-id prompts in batches of `batch_size` per request (the
    project's server batches within a request; vLLM also across requests), `concurrency`
    requests in flight, retries with backoff on connection errors and 5xx."""

    def __init__(self, name: str, cfg: CandidateParams, prompt: Prompt, charter: Charter, base_url: str,
                 seed: int):
        from decision_pipeline.lm.bpe import load_tokenizer

        self.name, self.cfg, self.prompt, self.charter, self.seed = name, cfg, prompt, charter, seed
        self.tokenizer = load_tokenizer(cfg.tokenizer or cfg.serve_model)
        self.url = base_url.rstrip("/") + "/completions"
        self.completion_tokens = 0
        self.prompt_tokens = 0
        self.truncated_prompts = 0
        self._lock = threading.Lock()

    def prompt_ids(self, doc: dict) -> list[int]:
        text = self.prompt.render(self.charter, document=doc["text"], safety_score=doc["safety_score"])
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        limit = self.cfg.max_prompt_tokens
        if limit and len(ids) > limit:
            self.truncated_prompts += 1
            ids = ids[-limit:]
        return ids

    def _post(self, body: dict) -> dict:
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.cfg.max_retries + 1):
            if attempt:
                time.sleep(0.2 * 2 ** (attempt - 1))
            req = urllib.request.Request(self.url, data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=self.cfg.timeout_s) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:200].decode(errors="replace")
                if exc.code < 500 and exc.code != 429:
                    raise PipelineError(f"candidate '{self.name}': {self.url} rejected the request "
                                        f"(HTTP {exc.code}: {' '.join(detail.split())})") from None
                last = f"HTTP {exc.code}"
            except (OSError, ValueError) as exc:
                last = str(getattr(exc, "reason", exc))
        raise PipelineError(f"candidate '{self.name}': endpoint {self.url} unreachable after "
                            f"{self.cfg.max_retries} retries ({last}); start the server or fix its base_url")

    def _batch(self, start: int, prompts: list[list[int]]) -> list[str]:
        body = {"model": self.cfg.model, "prompt": prompts, "max_tokens": self.cfg.max_tokens,
                "temperature": self.cfg.temperature, "seed": self.seed + start, "return_token_ids": True}
        answer = self._post(body)
        choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != len(prompts):
            raise PipelineError(f"candidate '{self.name}': {self.url} returned {len(choices)} choices for "
                                f"{len(prompts)} prompts")
        with self._lock:
            self.completion_tokens += int((answer.get("usage") or {}).get("completion_tokens", 0))
            self.prompt_tokens += int((answer.get("usage") or {}).get("prompt_tokens", 0))
        return [str(c.get("text") or "") for c in choices]

    def reflect(self, docs: Sequence[dict], offset: int = 0) -> list[str]:
        """Batches of `batch_size` from the start of `docs`; batch s is sampled with seed + offset + s, so a
        slice starting at a multiple of batch_size (a Ray chunk) gets what the whole list would."""
        ids = [self.prompt_ids(d) for d in docs]
        b = self.cfg.batch_size
        starts = list(range(0, len(ids), b))
        with ThreadPoolExecutor(max_workers=self.cfg.concurrency) as pool:
            parts = list(pool.map(lambda s: self._batch(offset + s, ids[s:s + b]), starts))
        return [t for part in parts for t in part]

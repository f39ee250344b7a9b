"""Chain generation with resume: k sampled chains per question, plus a teacher source.

Records go to a JSONL log one line at a time (see `JsonlAppender`), keyed
`<question>:<source>:<sample>`, so a killed run resumes where it stopped and
finishes with the same records an uninterrupted run writes.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Iterable, Sequence

from transformers import PreTrainedTokenizerBase

from decision_pipeline.common.io import JsonlAppender
from decision_pipeline.decision.prompts import encode, thinking_prefix
from decision_pipeline.decision.questions import LABELS, THINK_OPEN, assistant_answer, gold_index
from decision_pipeline.lm.backends import Backend, Completion, SamplingSettings


def record_id(question_id: str, source: str, sample: int) -> str:
    return f"{question_id}:{source}:{sample}"


def completion_record(q: dict, c: Completion, source: str, tok: PreTrainedTokenizerBase) -> dict:
    """A sampled chain as the assistant text it completes (`<think>` + sampled text).

    Timings stay out of the record (they go to the stage metrics), so a resumed
    log is byte-identical to an uninterrupted one.
    """
    text = c.text
    if text.endswith(tok.eos_token):
        text = text[: -len(tok.eos_token)]
    return {"id": record_id(q["id"], source, c.sample_index), "question_id": q["id"], "source": source,
            "sample": c.sample_index, "text": f"{THINK_OPEN}\n{text}", "token_ids": c.token_ids,
            "finish_reason": c.finish_reason, "n_tokens": len(c.token_ids)}


def solver_record(q: dict, tok: PreTrainedTokenizerBase) -> dict:
    """The family's own step-by-step trace as a teacher chain (the default-profile teacher)."""
    text = assistant_answer(q, LABELS[gold_index(q)], q["trace"])
    ids = encode(tok, text[len(THINK_OPEN) + 1:] + tok.eos_token)
    return {"id": record_id(q["id"], "teacher", 0), "question_id": q["id"], "source": "teacher", "sample": 0,
            "text": text, "token_ids": ids, "finish_reason": "stop", "n_tokens": len(ids)}


def generate_chains(questions: Sequence[dict], sources: dict[str, Backend | None], settings: SamplingSettings,
                    tok: PreTrainedTokenizerBase, log: JsonlAppender, chunk: int = 32,
                    deadline: float | None = None, progress: Callable[[Iterable], Iterable] = lambda x: x) -> dict:
    """Fill `log` with k chains per question per source; return counts and timings.

    `sources` maps a source name to a backend, or to None for the solver teacher.
    Questions whose records are all present are skipped (resume). Returns
    `stopped_early=True` when `deadline` (a `time.time()` value) passed.
    """
    stats = {"new_records": 0, "gen_seconds": 0.0, "gen_tokens": 0, "gen_questions": 0,
             "stopped_early": False}
    for source, backend in sources.items():
        n = 1 if backend is None else settings.n
        # Chunks are fixed over the whole question list and each is sampled with its own
        # seed, so a resumed run regenerates a half-written chunk identically and only
        # appends the records that are missing: same final file as an uninterrupted run.
        chunks = [questions[i:i + chunk] for i in range(0, len(questions), chunk)]
        for index in progress(range(len(chunks))):
            batch = chunks[index]
            wanted = [record_id(q["id"], source, s) for q in batch for s in range(n)]
            if all(w in log.done for w in wanted):
                continue
            if deadline is not None and time.time() > deadline:
                stats["stopped_early"] = True
                return stats
            if backend is None:
                records = [solver_record(q, tok) for q in batch]
            else:
                started = time.perf_counter()
                chunk_settings = replace(settings, seed=settings.seed * 1_000_003 + index)
                completions = backend.generate([thinking_prefix(tok, q) for q in batch], chunk_settings)
                stats["gen_seconds"] += time.perf_counter() - started
                records = [completion_record(batch[c.prompt_index], c, source, tok) for c in completions]
                stats["gen_tokens"] += sum(r["n_tokens"] for r in records)
                stats["gen_questions"] += len(batch)
            for r in records:
                if r["id"] not in log.done:
                    log.append(r)
                    stats["new_records"] += 1
    return stats

"""Chain generation with resume: k sampled chains per question, plus a teacher source.

Records go to JSONL shard logs one line at a time (see `JsonlAppender`), keyed
`<question>:<source>:<sample>`, so a killed run resumes where it stopped and
finishes with the same records an uninterrupted run writes; `generate.workers`
processes share the chunks and a merge writes one `chains.jsonl` in canonical
order at the end (`decision_pipeline.decision.generate.sharding`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, AbstractSet, Callable, Iterable, Mapping, Sequence

if TYPE_CHECKING:  # a type only: checking params must not import transformers
    from transformers import PreTrainedTokenizerBase

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.fingerprint import model_fingerprint, run_fingerprint
from decision_pipeline.common.io import JsonlAppender
from decision_pipeline.common.params import rule
from decision_pipeline.common.raycluster import RayParams, ray_cluster, replica_engine
from decision_pipeline.common.workdir import content_params
from decision_pipeline.decision.prompts import encode, thinking_prefix
from decision_pipeline.questions.schema import LABELS, THINK_OPEN, assistant_answer, gold_index
from decision_pipeline.lm.backends import BACKENDS, Backend, Completion, SamplingSettings, make_backend


@dataclass
class GenerateRayParams(RayParams):
    """The Ray cluster a sampling stage runs on (used only when its `engine` is ray)."""
    cpus_per_worker: int = rule(run_control=True, min=1, default=1,
                                doc="CPUs Ray reserves for each model replica on a CPU cluster (a GPU cluster gives "
                                    "each replica one GPU instead)")


@dataclass
class GenerateParams:
    """params.yaml `generate`: k sampled chains per pool question plus a teacher's chain."""
    backend: str = rule(choices=BACKENDS, doc="engine for the base model's chains: hf (CPU/GPU) or vllm (GPU)")
    k: int = rule(min=1, doc="chains sampled per question from the base model")
    temperature: float = rule(min=0.0, doc="sampling temperature (0 = greedy)")
    top_p: float = rule(min=0.0, max=1.0, doc="nucleus sampling mass (1.0 = off)")
    max_new_tokens: int = rule(min=1, doc="token cap per chain; a chain still open at the cap is a loop")
    batch_size: int = rule(min=1, doc="prompts per forward batch (hf backend)")
    chunk: int = rule(min=1, doc="questions per resumable unit; a killed run redoes at most one chunk")
    max_questions: int = rule(min=1, doc="pool questions used (a seed-free SHA-256 subset)")
    teacher: str = rule(choices=("solver", "openai", "none"),
                        doc="second chain source: the rule-based solver's traces (a stand-in for an LLM teacher), "
                            "an OpenAI-compatible endpoint, or none")
    teacher_base_url: str = rule(doc="teacher endpoint when teacher is openai, e.g. http://127.0.0.1:8000/v1")
    teacher_model: str = rule(doc="model name the teacher endpoint serves")
    concurrency: int = rule(run_control=True, min=1, doc="parallel requests to the teacher endpoint")
    teacher_timeout_s: float = rule(run_control=True, gt=0.0, doc="seconds one teacher request may take (non-streaming: the whole "
                                                "completion, k samples of up to max_new_tokens) before it is "
                                                "retried and finally fails naming this key")
    teacher_token_cap: int = rule(run_control=True, min=0, doc="completion tokens the teacher may spend over the whole log, resumes "
                                             "included (0 = no cap); at the cap the stage stops cleanly and a "
                                             "rerun with a higher cap continues")
    teacher_usd_per_mtok_in: float = rule(run_control=True, min=0.0, doc="teacher price per million prompt tokens (cost estimate)")
    teacher_usd_per_mtok_out: float = rule(run_control=True, min=0.0, doc="teacher price per million completion tokens (cost estimate)")
    deadline_minutes: float = rule(run_control=True, min=0.0, doc="stop cleanly at a chunk boundary after this long (0 = none); "
                                                "`dvc repro` resumes")
    target_pool_size: int = rule(min=1, doc="questions in the production pool, for the CPU/GPU-hours extrapolation")
    threads: int = rule(run_control=True, min=1, doc="torch CPU threads of each worker (not divided among workers: the thread "
                                   "count can change logits, so every worker uses the same)")
    workers: int = rule(run_control=True, min=1, doc="generation processes for the base model (CPU), or GPUs with one engine each; "
                                   "chunk i goes to worker i mod workers and chains.jsonl is the same for any value")
    teacher_deadline_s: float = rule(run_control=True, gt=0.0, default=900.0,
                                     doc="seconds one teacher request may take in all: every attempt (each at most "
                                         "teacher_timeout_s) and the back-off between retries; then it fails naming "
                                         "this key. A server that stops answering altogether (GET /models too) fails "
                                         "within about 80 s whatever this is")
    engine: str = replica_engine()
    ray: GenerateRayParams = ray_cluster(GenerateRayParams)


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
                    deadline: float | None = None, progress: Callable[[Iterable], Iterable] = lambda x: x,
                    shard: tuple[int, int] = (0, 1), skip: AbstractSet[str] = frozenset()) -> dict:
    """Fill `log` with k chains per question per source; return counts and timings.

    `sources` maps a source name to a backend, or to None for the solver teacher.
    Records already in `log` or in `skip` (other logs) are not written again (resume).
    `shard=(r, n)` samples only the chunks i with i % n == r: chunk boundaries and
    seeds do not depend on n, so n workers together write what one writes. Returns
    `stopped_early=True` when `deadline` (a `time.time()` value) passed.
    """
    rank, workers = shard
    stats = {"new_records": 0, "gen_seconds": 0.0, "gen_tokens": 0, "gen_questions": 0,
             "stopped_early": False}
    for source, backend in sources.items():
        n = 1 if backend is None else settings.n
        # Chunks are fixed over the whole question list and each is sampled with its own
        # seed, so a resumed run regenerates a half-written chunk identically and only
        # appends the records that are missing: same final file as an uninterrupted run.
        chunks = [questions[i:i + chunk] for i in range(0, len(questions), chunk)]
        for index in progress(range(rank, len(chunks), workers)):
            batch = chunks[index]
            wanted = [record_id(q["id"], source, s) for q in batch for s in range(n)]
            if all(w in log.done or w in skip for w in wanted):
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
                if r["id"] not in log.done and r["id"] not in skip:
                    log.append(r)
                    stats["new_records"] += 1
    return stats


def log_fingerprint(p: GenerateParams, seed: int, model_dir: str) -> str:
    """What a resumable chain log must match: the content-deciding params, the seed and the base weights."""
    # the knobs marked run_control (how far or fast a run goes: deadline, token cap, workers...) stay
    # out, so raising the teacher's cap continues the log instead of discarding it
    return run_fingerprint(content_params(p), seed, model_fingerprint(model_dir))


def teacher_spent(records: Iterable[dict]) -> int:
    """Completion tokens of the teacher chains already in the log (they count against the cap on resume)."""
    return sum(r["n_tokens"] for r in records if r["source"] == "teacher")


def teacher_source(p: GenerateParams, tok: PreTrainedTokenizerBase, spent: int = 0) -> Backend | None:
    """The second chain source: an OpenAI-compatible backend, or None (the solver, or no teacher).

    An OpenAI-compatible teacher is probed here, before the base model's generation,
    so an unreachable endpoint fails before anything is sampled or written."""
    if p.teacher != "openai":
        return None
    if not p.teacher_base_url:
        raise PipelineError("params.yaml: generate.teacher_base_url is empty; set it or use teacher: solver")
    cap = max(p.teacher_token_cap - spent, 0) if p.teacher_token_cap else None
    teacher = make_backend("openai", base_url=p.teacher_base_url, model=p.teacher_model,
                           concurrency=p.concurrency, tokenizer=tok, token_cap=cap,
                           timeout_s=p.teacher_timeout_s, timeout_key="generate.teacher_timeout_s",
                           deadline_s=p.teacher_deadline_s, deadline_key="generate.teacher_deadline_s")
    teacher.probe()
    return teacher


def teacher_accounting(records: Sequence[dict], questions_by_id: Mapping[str, dict], tok: PreTrainedTokenizerBase,
                       p: GenerateParams, stopped_by_cap: bool) -> dict:
    """Tokens in/out of the teacher's chains in the log and what they cost at the configured prices."""
    teacher = [r for r in records if r["source"] == "teacher"]
    tokens_in = sum(len(thinking_prefix(tok, questions_by_id[r["question_id"]])) for r in teacher)
    tokens_out = sum(r["n_tokens"] for r in teacher)
    priced = p.teacher == "openai"
    cost = (tokens_in * p.teacher_usd_per_mtok_in + tokens_out * p.teacher_usd_per_mtok_out) / 1e6
    return {"source": p.teacher, "chains": len(teacher), "tokens_in": tokens_in, "tokens_out": tokens_out,
            "estimated_usd": round(cost, 4) if priced else 0.0, "token_cap": p.teacher_token_cap,
            "stopped_by_cap": stopped_by_cap}


def canonical_order(records: list[dict]) -> list[dict]:
    """Records sorted by (question id, source, sample): a log repaired by hand or resumed in another
    order reads the same (the tie-break is the record id itself, which is unique)."""
    return sorted(records, key=lambda r: (r["question_id"], r["source"], r["sample"]))


def generation_metrics(records: Sequence[dict], questions: Sequence[dict], stats: dict, resumed: int,
                       p: GenerateParams) -> dict:
    """Counts per source, truncation and throughput of this invocation's generation."""
    base = [r for r in records if r["source"] == "base"]
    gen_s, gen_q = max(stats["gen_seconds"], 1e-9), stats["gen_questions"]
    # hours of this machine to run the base model over a pool of target size, at this run's rate
    hours = round(gen_s / gen_q * p.target_pool_size / 3600, 4) if gen_q else None
    return {"stopped_early": False, "questions": len(questions), "records": len(records), "resumed_records": resumed,
            "workers": p.workers,
            "base": {"chains": len(base), "finished": sum(r["finish_reason"] == "stop" for r in base),
                     "truncated": sum(r["finish_reason"] == "length" for r in base)},
            "throughput": {"tokens_per_second": round(stats["gen_tokens"] / gen_s, 2) if gen_q else None,
                           "items_per_minute": round(60 * gen_q / gen_s, 2) if gen_q else None,
                           "hours_for_target_pool_on_this_machine": hours}}

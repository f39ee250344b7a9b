"""The `generate` stage's run: a resumable chain log over sharded workers, then the teacher.

Why a module of its own: it builds on both the chain generator (generation.py) and the shard
logs (sharding.py, which itself builds on the generator); living in generation.py it made the
two import each other, hidden by function-level imports.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from transformers import PreTrainedTokenizerBase

from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.decision.generate import sharding
from decision_pipeline.decision.generate.generation import (GenerateParams, generation_metrics, log_fingerprint,
                                                   teacher_accounting, teacher_source, teacher_spent)
from decision_pipeline.decision.generate.ray_generation import chain_sampler
from decision_pipeline.lm.backends import SamplingSettings
from decision_pipeline.lm.backends.openai import TokenCapReached


def start_log(out: Path, fingerprint: str) -> None:
    """Params or base model changed: the old chains are not resumable, so drop them and record the new run."""
    out.mkdir(parents=True, exist_ok=True)
    sharding.clear_logs(out)
    write_text_atomic(out / "fingerprint.txt", fingerprint + "\n")


def generate_to_log(p: GenerateParams, seed: int, model, tok: PreTrainedTokenizerBase, model_dir: str,
                    questions: Sequence[dict], out_dir: str | Path, started: float) -> dict:
    """Fill `out_dir`/chains.jsonl (resuming a run of the same params and model) and return the metrics.

    A log written for other params or another base model is discarded first (its
    fingerprint is kept beside it). The base model's chains are spread over
    `p.workers` processes, each with its own shard log (or `p.workers` Ray actors whose chunks the
    driver logs: `engine: ray`, ray_generation.py); the teacher's follow in this
    process; `chains.jsonl` is written once, whole, when every chain is in. With
    `metrics["stopped_early"]` (deadline or teacher token cap) the shard logs are
    complete up to a chunk boundary, no `chains.jsonl` is written, and a rerun resumes.
    """
    out = Path(out_dir)
    fp = log_fingerprint(p, seed, model_dir)
    fp_file = out / "fingerprint.txt"
    stale = not fp_file.exists() or fp_file.read_text().strip() != fp
    logged = [] if stale else sharding.logged_records(out)
    # the teacher first: an unreachable endpoint fails before anything in `out_dir` is written;
    teacher = teacher_source(p, tok, teacher_spent(logged))
    workers = sharding.Workers(model_dir, p.backend, p.batch_size, p.threads, p.workers)
    sample = chain_sampler(p, workers, "generate", model, tok)  # likewise an unreachable or too small cluster
    if stale:
        start_log(out, fp)
    settings = SamplingSettings(max_new_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p,
                                n=p.k, seed=seed, stop_token_ids=(tok.eos_token_id,))
    deadline = started + 60 * p.deadline_minutes if p.deadline_minutes else None
    try:
        stats = sample(out, "base", questions, settings, p.chunk, deadline)
        if not stats["stopped_early"] and p.teacher != "none":
            chains = sharding.generate_in_process(out, "teacher", teacher, questions, settings, tok, p.chunk,
                                                  deadline, desc="generate teacher")
            stats = sharding.combine([stats, chains], parallel=False)
    except TokenCapReached as exc:
        return {"stopped_early": True, "records": len(sharding.logged_ids(out)), "stopped_by": "token_cap",
                "why": str(exc)}
    if stats["stopped_early"]:
        return {"stopped_early": True, "records": len(sharding.logged_ids(out)), "stopped_by": "deadline",
                "why": f"deadline of {p.deadline_minutes} min reached"}
    records = sharding.merge_logs(out)  # canonical order: a repaired, resumed or sharded log hashes the same
    metrics = generation_metrics(records, questions, stats, len(logged), p)
    metrics["teacher"] = teacher_accounting(records, {q["id"]: q for q in questions}, tok, p, False)
    return metrics

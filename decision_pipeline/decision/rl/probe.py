"""RL probe: k chains per candidate question from the SFT model, correct-of-k and the raw readout.

Why: GRPO learns only from groups whose chains disagree (all right or all wrong
gives every chain the same advantage), so `rl_select` keeps questions the SFT
model gets right 1..k-1 times out of k. Candidates are fresh questions (the
`rl` split: never seen by pretraining, SFT or evaluation) and a subset of the
SFT pool questions. Chains are sampled exactly as RL samples them
(`rl.temperature`, `rl.top_p`, `rl.max_completion_length`) through the
`generate` machinery: resumable shard logs over `rl_probe.workers` processes, one
merged `chains.jsonl` in canonical order, hf/vllm backends.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from decision_pipeline.common.fingerprint import model_fingerprint, run_fingerprint
from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.common.log import info
from decision_pipeline.decision.generate import sharding
from decision_pipeline.decision.parsing import parse_answer
from decision_pipeline.decision.prompts import chain_until_close
from decision_pipeline.decision.generate.ray_generation import chain_sampler
from decision_pipeline.questions.schema import gold_index
from decision_pipeline.lm.backends import SamplingSettings
from decision_pipeline.decision.rl.config import RlProbeParams

SOURCE = "sft"
ORIGINS = ("fresh", "sft")




@dataclass(frozen=True)
class ProbeSampling:
    """The RL sampling settings the probe copies (params `rl.temperature`, `rl.top_p`, `rl.max_completion_length`)."""
    temperature: float
    top_p: float
    max_new_tokens: int


def candidates(pool: Sequence[dict], fresh: Sequence[dict], p: RlProbeParams) -> list[dict]:
    """SHA-256 subsets of each origin, each question tagged with its origin, sorted by id."""
    chosen = [{**q, "origin": "fresh"} for q in stable_subset(list(fresh), p.fresh_questions, "rl_probe")]
    chosen += [{**q, "origin": "sft"} for q in stable_subset(list(pool), p.sft_questions, "rl_probe")]
    return sorted(chosen, key=lambda q: q["id"])


def probe_workers(p: RlProbeParams, model_dir: str, runtime=None, model=None, tok=None) -> Callable[..., dict]:
    """Who samples the probe chains: `p.workers` processes, or with `engine: ray` as many Ray replicas
    (ray_generation.chain_sampler). With `engine: ray` this joins the cluster and checks it can hold
    `p.workers` replicas (one line naming `rl_probe.ray.address` or `rl_probe.workers` otherwise): the
    stage calls it before its readout pass, so a bad cluster fails in seconds with nothing written."""
    workers = sharding.Workers(model_dir, p.backend, p.batch_size, p.threads, p.workers, runtime)
    return chain_sampler(p, workers, "rl_probe", model, tok, desc="rl_probe")


def probe_log(p: RlProbeParams, s: ProbeSampling, seed: int, model, tok, model_dir: str,
              questions: Sequence[dict], out_dir: str | Path, runtime=None) -> dict:
    """Fill `out_dir`/chains.jsonl with k chains per question (resuming a run of the same
    params and model; `p.workers` processes share the chunks, or `p.workers` Ray actors with
    `engine: ray`, ray_generation.py), written once in canonical
    order when complete, and return generation counts.

    `chunk` is part of the fingerprint: chunk i is sampled with its own seed, so another
    chunk size gives other chains and a log cut differently must not be resumed. `runtime`
    (RuntimeParams, None = its defaults) places the model and sizes a vLLM engine; it decides where
    the chains are computed, not what they are, so it stays out of the fingerprint."""
    sample = probe_workers(p, model_dir, runtime, model, tok)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # where the chains are computed (threads, workers, engine, cluster) is not what they are
    content = {k: v for k, v in asdict(p).items() if k not in ("threads", "workers", "engine", "ray")}
    fp = run_fingerprint(content, asdict(s), seed, [q["id"] for q in questions], model_fingerprint(model_dir))
    fp_file = out / "fingerprint.txt"
    if not fp_file.is_file() or fp_file.read_text().strip() != fp:
        if (out / sharding.MERGED).exists() or sharding.shard_logs(out):
            info("rl_probe", "params, questions or model changed: the old probe log is not resumed")
        sharding.clear_logs(out)
        write_text_atomic(fp_file, fp + "\n")
    settings = SamplingSettings(max_new_tokens=s.max_new_tokens, temperature=s.temperature, top_p=s.top_p,
                                n=p.k, seed=seed, stop_token_ids=(tok.eos_token_id,))
    resumed = len(sharding.logged_ids(out))
    stats = sample(out, SOURCE, questions, settings, p.chunk)
    sharding.merge_logs(out)
    return {"resumed_records": resumed, "new_records": stats["new_records"], "workers": p.workers,
            "tokens_per_second": round(stats["gen_tokens"] / max(stats["gen_seconds"], 1e-9), 1)
            if stats["gen_questions"] else None}


def probe_rows(questions: Sequence[dict], chains: Sequence[dict], readout_logits: Sequence[np.ndarray],
               tok, k: int) -> list[dict]:
    """One row per question: origin, correct-of-k, unfinished-of-k, tokens, and the raw readout logits."""
    by_q: dict[str, list[dict]] = {}
    for c in chains:
        by_q.setdefault(c["question_id"], []).append(c)
    rows = []
    for q, logits in zip(questions, readout_logits):
        own = sorted(by_q.get(q["id"], []), key=lambda c: c["sample"])
        if len(own) != k:
            raise ValueError(f"probe log holds {len(own)} chains for question {q['id']!r}, expected {k}")
        gold = gold_index(q)
        closed = [chain_until_close(tok, c["token_ids"]) is not None for c in own]
        answers = [parse_answer(c["text"], len(q["options"])) if done else None for c, done in zip(own, closed)]
        rows.append({"id": q["id"], "origin": q["origin"], "family": q["family"], "level": q["level"],
                     "task": q["task"], "k": k, "correct": sum(a == gold for a in answers),
                     "unfinished": sum(not d for d in closed), "parsed": sum(a is not None for a in answers),
                     "mean_tokens": round(float(np.mean([c["n_tokens"] for c in own])), 3),
                     "readout_logits": [round(float(v), 5) for v in logits]})
    return rows


def probe_metrics(rows: Sequence[dict], k: int, generation: dict) -> dict:
    """Correct-of-k histograms per origin and the share of questions whose k chains disagree."""
    out: dict = {"k": k, "questions": len(rows), **generation}
    for origin in ORIGINS:
        mine = [r for r in rows if r["origin"] == origin]
        hist = Counter(r["correct"] for r in mine)
        chains = len(mine) * k
        out[origin] = {"questions": len(mine), "correct_of_k": {str(i): hist.get(i, 0) for i in range(k + 1)},
                       "mixed_share": round(sum(0 < r["correct"] < k for r in mine) / len(mine), 6) if mine else None,
                       "chain_accuracy": round(sum(r["correct"] for r in mine) / chains, 6) if chains else None,
                       "unfinished_share": round(sum(r["unfinished"] for r in mine) / chains, 6) if chains else None,
                       "parse_rate": round(sum(r["parsed"] for r in mine) / chains, 6) if chains else None}
    out["mixed_share"] = round(sum(0 < r["correct"] < k for r in rows) / len(rows), 6) if rows else None
    return out

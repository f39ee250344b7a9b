"""Stage `generate`: k reasoning chains per pool question from the base model, plus a teacher.

Teacher: `solver` (the families' own traces, default profile), `openai` (an
OpenAI-compatible endpoint, GPU profile) or `none`. The JSONL log lives in a
`persist: true` directory: a killed run resumes from it; a change of params or
base model starts it afresh (its fingerprint is kept beside it). With
`deadline_minutes` the stage stops cleanly at a chunk boundary and exits
non-zero so DVC does not record a partial result; `dvc repro` resumes.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import file_sha256, sha256_int, stable_subset
from decision_pipeline.common.io import JsonlAppender, read_jsonl, write_json
from decision_pipeline.common.log import info, progress, stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from decision_pipeline.decision.generation import generate_chains
from decision_pipeline.decision.questions import load_items
from decision_pipeline.lm.backends import BACKENDS, SamplingSettings, backend_for_model, make_backend
from decision_pipeline.lm.model import load_model
from decision_pipeline.lm.bpe import load_tokenizer


@dataclass
class GenerateParams:
    backend: str = rule(choices=BACKENDS)
    k: int = rule(min=1)
    temperature: float = rule(min=0.0)
    top_p: float = rule(min=0.0, max=1.0)
    max_new_tokens: int = rule(min=1)
    batch_size: int = rule(min=1)
    chunk: int = rule(min=1)                 # questions per resumable unit
    max_questions: int = rule(min=1)         # limit on pool questions used
    teacher: str = rule(choices=("solver", "openai", "none"))
    teacher_base_url: str = ""
    teacher_model: str = ""
    concurrency: int = rule(min=1, default=4)
    deadline_minutes: float = rule(min=0.0, default=0.0)  # 0 = no deadline
    target_pool_size: int = rule(min=1, default=100000)   # for the device-hours extrapolation
    threads: int = rule(min=1, default=2)


def _fingerprint(p: GenerateParams, seed: int, model_dir: str) -> str:
    weights = sorted(Path(model_dir).glob("*.safetensors"))
    digest = ",".join(file_sha256(str(w)) for w in weights)
    return f"{sha256_int(json.dumps(dataclasses.asdict(p), sort_keys=True), seed, digest):016x}"


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--model", default="models/base")
    ap.add_argument("--items", default="data/items/items.parquet")
    ap.add_argument("--out", default="data/generate")
    ap.add_argument("--metrics", default="metrics/generate.json")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(GenerateParams, "generate", args.params)
    seed = load_base(args.params).seed
    torch.set_num_threads(p.threads)
    model, tok = load_model(args.model), load_tokenizer(args.model)
    questions = stable_subset(load_items(args.items, split="pool"), p.max_questions, "generate")
    questions.sort(key=lambda q: q["id"])
    sources = {"base": backend_for_model(p.backend, model, tok, args.model, p.batch_size)}
    if p.teacher == "solver":
        sources["teacher"] = None
    elif p.teacher == "openai":
        if not p.teacher_base_url:
            raise PipelineError("params.yaml: generate.teacher_base_url is empty; set it or use teacher: solver")
        sources["teacher"] = make_backend("openai", base_url=p.teacher_base_url, model=p.teacher_model,
                                          concurrency=p.concurrency, tokenizer=tok)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fp = _fingerprint(p, seed, args.model)
    fp_file, log_file = out / "fingerprint.txt", out / "chains.jsonl"
    if not fp_file.exists() or fp_file.read_text().strip() != fp:
        log_file.unlink(missing_ok=True)  # params or base model changed: old chains are not resumable
        fp_file.write_text(fp + "\n")
    settings = SamplingSettings(max_new_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p,
                                n=p.k, seed=seed, stop_token_ids=(tok.eos_token_id,))
    deadline = started + 60 * p.deadline_minutes if p.deadline_minutes else None
    with JsonlAppender(log_file) as log:
        if log.dropped_partial:
            info("generate", "dropped a torn last line from the previous run")
        resumed = len(log.done)
        stats = generate_chains(questions, sources, settings, tok, log, p.chunk, deadline,
                                progress=lambda it: progress(it, desc="generate", unit="chunk"))
    if stats["stopped_early"]:
        print(f"error: generate: deadline of {p.deadline_minutes} min reached with {len(log.done)} records; "
              "rerun `dvc repro` to resume", file=sys.stderr)
        raise SystemExit(3)
    records = read_jsonl(log_file)
    base = [r for r in records if r["source"] == "base"]
    gen_s, gen_q = max(stats["gen_seconds"], 1e-9), stats["gen_questions"]
    # device-hours to run the base model over a pool of target size, at this run's rate
    hours = round(gen_s / gen_q * p.target_pool_size / 3600, 4) if gen_q else None
    metrics = {"questions": len(questions), "records": len(records), "resumed_records": resumed,
               "base": {"chains": len(base), "finished": sum(r["finish_reason"] == "stop" for r in base),
                        "truncated": sum(r["finish_reason"] == "length" for r in base)},
               "teacher": {"source": p.teacher, "chains": len(records) - len(base)},
               "throughput": {"tokens_per_second": round(stats["gen_tokens"] / gen_s, 2) if gen_q else None,
                              "items_per_minute": round(60 * gen_q / gen_s, 2) if gen_q else None,
                              "device_hours_for_target_pool": hours}}
    write_json(args.metrics, metrics)
    summary("generate", started, questions=len(questions), records=len(records), resumed=resumed,
            tok_per_s=metrics["throughput"]["tokens_per_second"], truncated=metrics["base"]["truncated"])



if __name__ == "__main__":
    raise SystemExit(main())

"""Annotation on a Ray cluster (`reflect.engine: ray`): the seed documents in chunks, each chunk
reflected by one of `reflect.ray.workers` Ray actors, the driver writing one resumable log.

Why this shape: the research's annotation run is the job that outgrows one machine (51.4M documents,
~13,000 GPU-hours), and a candidate's reflections depend only on the document and, for a model
behind an endpoint, on the request seed `seed + index of the batch's first document` (generators.py).
So the driver cuts the documents into chunks whose starts are multiples of the candidate's
`batch_size`, and any actor on any node writes what one process would:

- each actor builds the candidate's generator once: a rule-based reference generator, or an endpoint
  generator that talks to its own served replica (`serve_model`: the model directory's bytes are
  shipped through Ray's object store, no shared disk needed; one GPU per replica on a GPU cluster)
  or to the shared `base_url`;
- the driver keeps every actor busy with one chunk at a time and appends each finished chunk to
  `<out dir>/<candidate>.ray.jsonl` the moment it comes back; a rerun of the same candidate, prompt,
  documents and seed skips the logged chunks (a different run discards the log); the log is removed
  once the stage has every reflection.

Faults: a dead actor is restarted by Ray and its chunk resubmitted (`raypool.RESTARTS`); the chunk is
reflected again with the same seeds and logged once. An unreachable or too small cluster is one line
naming `reflect.ray.address` / `reflect.ray.workers` before anything is written. The pool of actors
over the log is common/raypool.py, shared with `generate`; what is here is what an actor does.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from decision_pipeline.charter.charter import Charter
from decision_pipeline.charter.checks import CheckParams
from decision_pipeline.charter.generators import CandidateParams, make_generator
from decision_pipeline.charter.prompts import Prompt
from decision_pipeline.charter.throughput import served
from decision_pipeline.common import raycluster, raypool
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.fingerprint import model_fingerprint, run_fingerprint
from decision_pipeline.common.io import JsonlAppender, read_jsonl, write_text_atomic
from decision_pipeline.common.params import rule
from decision_pipeline.common.raycluster import RayParams

#: settings that decide how requests are sent, not what comes back
TRANSPORT = ("concurrency", "timeout_s", "max_retries", "gpus")


@dataclass
class ReflectRayParams(RayParams):
    """Where and how wide `reflect` runs with `engine: ray`."""
    workers: int = rule(run_control=True, min=1, default=2, doc="generator actors (each serves its own replica "
                                                                 "when the candidate has serve_model)")
    chunk_docs: int = rule(run_control=True, min=1, default=64,
                           doc="documents per Ray task and per line of the resume log (rounded up to a multiple of "
                               "the candidate's batch_size, so request seeds fall as in one process)")
    cpus_per_worker: int = rule(run_control=True, min=1, default=1,
                                doc="CPUs Ray reserves per actor (an endpoint candidate's served replica takes its "
                                    "`gpus` GPUs instead on a GPU cluster)")


def chunk_size(asked: int, c: CandidateParams) -> int:
    """`asked` rounded up to a multiple of an endpoint's batch size (request seeds count from a batch start)."""
    b = c.batch_size if c.kind == "endpoint" else 1
    return -(-asked // b) * b


def log_path(log_dir: Path, name: str) -> Path:
    return log_dir / f"{name}.ray.jsonl"


def run_key(name: str, c: CandidateParams, prompt: Prompt | None, charter: Charter, checks: CheckParams,
            docs: Sequence[dict], seed: int, chunk: int) -> str:
    """What the reflections depend on: a log written under another key is not resumed."""
    cand = {k: v for k, v in asdict(c).items() if k not in TRANSPORT}
    model = model_fingerprint(c.serve_model) if c.kind == "endpoint" and c.serve_model else c.model
    return run_fingerprint(name, cand, prompt.template if prompt else "", charter.text, asdict(checks), seed, chunk,
                           model, [(d["id"], d["text"], d["safety_score"]) for d in docs])


class ReflectReplica:
    """One generator (a Ray actor): reflects whole chunks and returns their texts."""

    def __init__(self, files: dict[str, bytes] | None, name: str, c: CandidateParams, charter: Charter,
                 checks: CheckParams, prompt: Prompt | None, seed: int) -> None:
        self.server = None
        url = c.base_url
        if files is not None:  # serve_model: this actor's own replica, from the shipped bytes
            root = raypool.unpack(files, "ray-reflect-")
            c = replace(c, serve_model=root, tokenizer=c.tokenizer or root)
            self.server = served(root, c.model, timeout_s=120)
            url, _pid = self.server.__enter__()
        self.gen = make_generator(name, c, charter, checks, prompt, url, seed)

    def run(self, start: int, docs: list[dict]) -> tuple[int, list[str], int]:
        before = getattr(self.gen, "truncated_prompts", 0)
        texts = self.gen.reflect(docs, start)
        return start, texts, getattr(self.gen, "truncated_prompts", 0) - before

    def close(self) -> None:
        """Stop the served replica (by its pid) before the actor goes."""
        if self.server is not None:
            self.server.__exit__(None, None, None)
            self.server = None


def _attach(cfg: ReflectRayParams, c: CandidateParams) -> tuple[Any, dict]:
    """Join the cluster and check it can hold the actors at once; the resources of one actor (a served
    replica's `gpus` GPUs on a GPU cluster)."""
    gpus = c.gpus if c.kind == "endpoint" and c.serve_model else 0
    return raypool.attach(cfg.address, "reflect.ray.address", cfg.workers, "reflect.ray.workers", cfg.cpus_per_worker,
                          gpus, f"reflect.ray.workers is {cfg.workers} (x {c.gpus} GPU each) but the Ray cluster at "
                                f"{cfg.address} has {{gpus}} GPU(s); lower reflect.ray.workers")


def reflect_on_ray(name: str, c: CandidateParams, charter: Charter, checks: CheckParams, prompt: Prompt | None,
                   docs: Sequence[dict], seed: int, cfg: ReflectRayParams, log_dir: Path
                   ) -> tuple[list[str], int, object]:
    """Every document's reflection (in `docs` order) and the truncated-prompt count, from Ray actors, and
    a reference candidate's generator (annotate.reflect_here's triple: the rows' stated properties come
    from the rule itself, cheap and without a model, so it is built here; None for an endpoint)."""
    ray, resources = _attach(cfg, c)
    chunk = chunk_size(cfg.chunk_docs, c)
    path = log_path(log_dir, name)
    key = run_key(name, c, prompt, charter, checks, docs, seed, chunk)
    key_file = path.with_suffix(".key")
    if not key_file.is_file() or key_file.read_text().strip() != key:
        path.unlink(missing_ok=True)
        log_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(key_file, key + "\n")

    def receive(result: tuple[int, list[str], int], _actor: int) -> list[dict]:
        start, texts, truncated = result
        return [{"id": f"chunk-{start}", "start": start, "texts": texts, "truncated": truncated}]

    try:
        with JsonlAppender(path) as log:
            todo = [lo for lo in range(0, len(docs), chunk) if f"chunk-{lo}" not in log.done]
            if todo:
                raypool.run(ray, ReflectReplica, (name, c, charter, checks, prompt, seed),
                            min(cfg.workers, len(todo)), resources, todo, log,
                            lambda actor, lo, _: actor.run.remote(lo, list(docs[lo:lo + chunk])), receive,
                            label=f"reflect@{name}", noun="actor", close="close",
                            ship=c.serve_model if c.kind == "endpoint" and c.serve_model else None)
    finally:
        raycluster.disconnect(ray)
    parts = sorted(read_jsonl(path), key=lambda r: r["start"])
    texts = [t for part in parts for t in part["texts"]]
    if len(texts) != len(docs):
        raise PipelineError(f"{path}: {len(texts)} reflections logged for {len(docs)} documents; delete it and rerun")
    path.unlink()
    key_file.unlink()
    gen = make_generator(name, c, charter, checks, prompt, "", seed) if c.kind == "reference" else None
    return texts, sum(part["truncated"] for part in parts), gen

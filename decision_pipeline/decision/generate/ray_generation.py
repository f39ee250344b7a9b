"""Chain generation on a Ray cluster (`generate.engine: ray`): one model replica per Ray actor,
chunks scheduled over the actors, one durable log written by the driver.

Why this shape: `generate_chains` already cuts the question list into fixed chunks and samples
chunk i with its own seed (`settings.seed * 1_000_003 + i`), so *which* actor on *which* node
samples a chunk cannot change its records. The driver therefore

- ships the model directory's bytes to the cluster once (`ray.put`: no shared filesystem needed;
  each actor writes them to a local temp dir and loads its replica from there);
- starts `workers` actors (one GPU each on a GPU cluster, else `ray.cpus_per_worker` CPUs) and keeps
  every actor busy with one pending chunk at a time (`ray.wait`);
- appends a chunk's records to its own log (`shards/<source>.ray.jsonl`, one line per record) the
  moment the chunk comes back, so a finished chunk is durable and a rerun skips it, as the local
  shard logs are; the merge (`sharding.merge_logs`) then writes `chains.jsonl` in canonical order:
  the same bytes as `engine: local` for any number of actors and nodes.

Faults: an actor whose process dies (a killed worker, a lost node) is restarted by Ray
(`max_restarts`) and the chunk it held is resubmitted (`max_task_retries`): it is sampled again with
the same seed, and the driver writes only ids it has not written, so nothing is lost or doubled.
The cluster unreachable at start, or smaller than `workers` replicas, is one line naming the key
(common/raycluster.py) before anything is written.

The pool of actors over the log (resources, shipping, restarts, teardown, Ray errors) is
common/raypool.py, shared with `reflect`; what is here is what a replica does with a chunk.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from decision_pipeline.common import raycluster, raypool
from decision_pipeline.common.io import JsonlAppender
from decision_pipeline.decision.generate.generation import GenerateRayParams, generate_chains, record_id
from decision_pipeline.decision.generate.sharding import SHARD_DIR, Workers, exclusive, generate_sharded, logged_ids
from decision_pipeline.lm.backends import SamplingSettings


def ray_log(out: Path, source: str) -> Path:
    """The driver's log of `source` (beside the local workers' shard logs, merged the same way)."""
    return out / SHARD_DIR / f"{source}.ray.jsonl"


def pending_chunks(questions: Sequence[dict], source: str, n: int, chunk: int, done: set[str] | frozenset[str]
                   ) -> list[int]:
    """Indices of the chunks with a record still missing (generate_chains' chunking)."""
    out = []
    for index, lo in enumerate(range(0, len(questions), chunk)):
        wanted = (record_id(q["id"], source, s) for q in questions[lo:lo + chunk] for s in range(n))
        if not all(w in done for w in wanted):
            out.append(index)
    return out


class _Collect:
    """A log stand-in inside an actor: `generate_chains` appends here, the driver writes the file."""

    def __init__(self) -> None:
        self.done: set[str] = set()
        self.records: list[dict] = []

    def append(self, record: dict) -> None:
        self.done.add(record["id"])
        self.records.append(record)


class ChunkSampler:
    """One model replica (a Ray actor): samples whole chunks, returns their records."""

    def __init__(self, files: dict[str, bytes], w: Workers) -> None:
        import torch

        from decision_pipeline.lm.backends import backend_for_model
        from decision_pipeline.lm.bpe import load_tokenizer
        from decision_pipeline.lm.model import load_model
        self.dir = raypool.unpack(files, "ray-replica-")
        torch.set_num_threads(w.threads)  # fixed per replica: the thread count can change logits
        self.tok = load_tokenizer(self.dir)
        device = w.runtime.device if w.runtime is not None else "auto"
        model = load_model(self.dir, device=device) if w.backend == "hf" else None
        self.backend = backend_for_model(w.backend, model, self.tok, self.dir, w.batch_size, w.runtime)

    def sample(self, index: int, n_chunks: int, questions: list[dict], source: str, settings: SamplingSettings,
               chunk: int) -> tuple[int, list[dict], dict]:
        log = _Collect()
        stats = generate_chains(questions, {source: self.backend}, settings, self.tok, log, chunk,
                                shard=(index, n_chunks))
        return index, log.records, stats


def attach(cluster: GenerateRayParams, w: Workers, key: str) -> tuple[Any, dict]:
    """Join the cluster and check it can hold `w.count` replicas at once (else one line naming the key);
    returns `ray` and each replica's resources (one GPU on a GPU cluster unless the runtime is the CPU).
    Called before anything is written, and again (a no-op join) when sampling starts."""
    gpus = 1 if w.runtime is None or w.runtime.device != "cpu" else 0
    return raypool.attach(cluster.address, f"{key}.ray.address", w.count, f"{key}.workers", cluster.cpus_per_worker,
                          gpus, f"{key}.workers is {w.count} but the Ray cluster at {cluster.address} has {{gpus}} "
                                f"GPU(s); lower {key}.workers or add GPU nodes")


def generate_on_ray(out: Path, source: str, questions: Sequence[dict], settings: SamplingSettings, chunk: int,
                    w: Workers, cluster: GenerateRayParams, deadline: float | None = None, key: str = "generate"
                    ) -> dict:
    """Sample `source`'s missing chunks over `w.count` Ray actors into the driver's log; summed counts.

    `gen_seconds` is the busiest replica's sampling time (they run side by side), as for local workers.
    """
    done = set(logged_ids(out))
    todo = pending_chunks(questions, source, settings.n, chunk, done)
    stats = {"new_records": 0, "gen_seconds": 0.0, "gen_tokens": 0, "gen_questions": 0, "stopped_early": False}
    if not todo:
        return stats
    ray, resources = attach(cluster, w, key)
    n_chunks = -(-len(questions) // chunk)
    per_replica = [0.0] * w.count

    def receive(result: tuple[int, list[dict], dict], r: int) -> list[dict]:
        _, records, chunk_stats = result
        per_replica[r] += chunk_stats["gen_seconds"]
        stats["gen_tokens"] += chunk_stats["gen_tokens"]
        stats["gen_questions"] += chunk_stats["gen_questions"]
        return records

    path = ray_log(out, source)
    try:
        with exclusive(path), JsonlAppender(path) as log:
            stats["new_records"], stats["stopped_early"] = raypool.run(
                ray, ChunkSampler, (w,), w.count, resources, todo, log,
                lambda replica, index, qs: replica.sample.remote(index, n_chunks, qs, source, settings, chunk),
                receive, label=key, noun="replica", ship=w.model_dir, shared=list(questions), skip=done,
                stop=None if deadline is None else lambda: time.time() > deadline)
    finally:
        raycluster.disconnect(ray)
    stats["gen_seconds"] = max(per_replica)
    return stats


def chain_sampler(p: Any, w: Workers, key: str, model: Any = None, tok: Any = None, desc: str = "generate"
                  ) -> Callable[..., dict]:
    """How `generate` and `rl_probe` sample a source's chains, by their `engine` (raycluster.choose):
    `w.count` local workers (sharding.generate_sharded), or as many Ray replicas (generate_on_ray) once
    the cluster is joined and found big enough here, before anything is written. The sampler takes
    (out, source, questions, settings, chunk, deadline=None) and returns the summed counts."""
    def local(out: Path, source: str, questions: Sequence[dict], settings: SamplingSettings, chunk: int,
              deadline: float | None = None) -> dict:
        return generate_sharded(out, source, questions, settings, tok, chunk, w, model, deadline, desc)

    def on_ray(out: Path, source: str, questions: Sequence[dict], settings: SamplingSettings, chunk: int,
               deadline: float | None = None) -> dict:
        return generate_on_ray(out, source, questions, settings, chunk, w, p.ray, deadline, key)

    return raycluster.choose(p, local, on_ray, check=lambda: attach(p.ray, w, key))

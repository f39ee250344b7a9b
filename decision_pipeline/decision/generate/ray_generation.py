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
"""
from __future__ import annotations

import gc
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from decision_pipeline.common import raycluster
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import JsonlAppender
from decision_pipeline.decision.generate.generation import GenerateRayParams, generate_chains, record_id
from decision_pipeline.decision.generate.sharding import SHARD_DIR, Workers, exclusive, logged_ids
from decision_pipeline.lm.backends import SamplingSettings

#: how often Ray restarts a dead replica and resubmits its chunk before the stage fails
RESTARTS = 3


def ray_log(out: Path, source: str) -> Path:
    """The driver's log of `source` (beside the local workers' shard logs, merged the same way)."""
    return out / SHARD_DIR / f"{source}.ray.jsonl"


def model_files(model_dir: str) -> dict[str, bytes]:
    """Every file of the model directory by relative path: what a replica needs, without a shared disk."""
    root = Path(model_dir)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


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
        self.dir = tempfile.mkdtemp(prefix="ray-replica-")
        for rel, data in files.items():
            path = Path(self.dir) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
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
    returns `ray` and each replica's resources. Called before anything is written, and again (a no-op
    join) when sampling starts."""
    ray = raycluster.connect(cluster.address, f"{key}.ray.address")
    gpus = raycluster.cluster_gpus(ray)
    if gpus and (w.runtime is None or w.runtime.device != "cpu"):
        if w.count > gpus:
            raycluster.disconnect(ray)
            raise PipelineError(f"{key}.workers is {w.count} but the Ray cluster at {cluster.address} has {gpus} "
                                f"GPU(s); lower {key}.workers or add GPU nodes")
        return ray, {"num_gpus": 1, "num_cpus": 1}
    try:
        raycluster.check_capacity(ray, w.count, cluster.cpus_per_worker, f"{key}.workers", cluster.address)
    except PipelineError:
        raycluster.disconnect(ray)
        raise
    return ray, {"num_cpus": cluster.cpus_per_worker}


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
    try:
        actor = ray.remote(ChunkSampler).options(max_restarts=RESTARTS, max_task_retries=RESTARTS, **resources)
        files = ray.put(model_files(w.model_dir))
        qref = ray.put(list(questions))
        replicas = [actor.remote(files, w) for _ in range(w.count)]
        n_chunks = -(-len(questions) // chunk)
        busy: dict[Any, int] = {}
        ready: list = []
        per_replica = [0.0] * len(replicas)
        queue = list(todo)
        path = ray_log(out, source)
        with exclusive(path), JsonlAppender(path) as log:
            done |= log.done
            while queue or busy:
                for r in range(len(replicas)):
                    if queue and r not in busy.values():
                        if deadline is not None and time.time() > deadline:
                            stats["stopped_early"] = True
                            queue.clear()
                            break
                        busy[replicas[r].sample.remote(queue.pop(0), n_chunks, qref, source, settings, chunk)] = r
                if not busy:
                    break
                ready, _ = ray.wait(list(busy), num_returns=1)
                r = busy.pop(ready[0])
                _, records, chunk_stats = ray.get(ready[0])
                for rec in records:
                    if rec["id"] not in done:
                        log.append(rec)
                        done.add(rec["id"])
                        stats["new_records"] += 1
                per_replica[r] += chunk_stats["gen_seconds"]
                stats["gen_tokens"] += chunk_stats["gen_tokens"]
                stats["gen_questions"] += chunk_stats["gen_questions"]
        stats["gen_seconds"] = max(per_replica)
        for replica in replicas:
            ray.kill(replica)
        # every handle and object ref goes while the driver is still connected: one collected after
        # ray.shutdown (at interpreter exit) can block the process forever in Ray's core worker
        del replicas, busy, files, qref, ready
        gc.collect()
    except ray.exceptions.RayError as exc:
        reason = " ".join(str(exc).split())[:200]
        raise PipelineError(f"{key}: a Ray replica failed beyond {RESTARTS} restarts ({reason}); "
                                       f"finished chunks are kept in {ray_log(out, source)}: rerun to resume") from None
    finally:
        raycluster.disconnect(ray)
    return stats

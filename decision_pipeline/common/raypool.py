"""One mechanism for a stage's Ray actors: a pool of actors over a resumable chunk log.

Why one module: `generate` and `rl_probe` (model replicas sampling chunks of questions) and `reflect`
(generators reflecting chunks of seed documents) run the same loop. The driver

- joins the cluster and reserves each actor's resources (`attach`: a GPU share each on a cluster with
  GPUs when the work wants them, else `cpus_each` CPUs); a count the cluster cannot hold at once would
  wait forever, so it is one line naming the workers key, before anything is written;
- ships a model directory's bytes through Ray's object store once (`model_files`; each actor writes
  them to a temp dir of its own with `unpack`): no shared disk is needed;
- keeps every actor busy with one chunk at a time and appends what a chunk returns to the stage's
  JSONL log the moment it comes back, so a finished chunk is durable and a rerun skips it (`run`);
- survives a dead actor: Ray restarts it and resubmits the chunk it held (`RESTARTS`); the chunk is
  worked again with the same seeds, and only ids the log lacks are written, so nothing is doubled;
- tears the actors down and drops every handle and object ref while still connected (one collected
  after `ray.shutdown`, at interpreter exit, can block the process forever in Ray's core worker);
- turns a Ray failure into one line (`PipelineError`) that says where the finished chunks are kept.

What an actor does with a chunk stays with its stage (decision/generate/ray_generation.py,
charter/ray_reflect.py); the connection itself is common/raycluster.py. Curation's Ray Data tasks
join through the same `attach` and raise their errors through `task_errors`.
"""
from __future__ import annotations

import gc
import tempfile
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from decision_pipeline.common import raycluster
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import JsonlAppender

#: how often Ray restarts a dead actor and resubmits its chunk before the stage fails
RESTARTS = 3


def model_files(model_dir: str | Path) -> dict[str, bytes]:
    """Every file of a model directory by relative path: what an actor needs, without a shared disk."""
    root = Path(model_dir)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def unpack(files: dict[str, bytes], prefix: str) -> str:
    """Inside an actor: write shipped `model_files` into a new temp dir; its path."""
    root = tempfile.mkdtemp(prefix=prefix)
    for rel, data in files.items():
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def attach(cluster: raycluster.RayParams, address_key: str, workers: int, workers_key: str, cpus_each: int,
           gpus_each: int = 0, gpu_refusal: str = "") -> tuple[Any, dict]:
    """Join the cluster at `cluster.address` (within its `connect_timeout_s`) and check it can hold `workers`
    actors at once; returns `ray` and one actor's resources. On a cluster with GPUs an actor with `gpus_each` > 0 takes that many GPUs (and one
    CPU); otherwise `cpus_each` CPUs. Too few is one line: `gpu_refusal` (its `{gpus}`: the cluster's GPUs),
    or raycluster.check_capacity's naming `workers_key`; the driver is detached again first."""
    address = cluster.address
    ray = raycluster.connect(address, address_key, cluster.connect_timeout_s)
    try:
        gpus = raycluster.cluster_gpus(ray)
        if gpus and gpus_each:
            if workers * gpus_each > gpus:
                raise PipelineError(gpu_refusal.format(gpus=gpus))
            return ray, {"num_gpus": gpus_each, "num_cpus": 1}
        raycluster.check_capacity(ray, workers, cpus_each, workers_key, address)
    except PipelineError:
        raycluster.disconnect(ray)
        raise
    return ray, {"num_cpus": cpus_each}


def run(ray: Any, actor: type, init: Sequence, count: int, resources: dict, chunks: Iterable, log: JsonlAppender,
        submit: Callable[[Any, Any, Any], Any], receive: Callable[[Any, int], Iterable[dict]], *,
        label: str, noun: str, ship: str | Path | None = None, shared: Any = None,
        skip: Container[str] = frozenset(), stop: Callable[[], bool] | None = None,
        close: str | None = None) -> tuple[int, bool]:
    """Work `chunks` over `count` actors `actor(files, *init)`, appending what each returns to `log`.

    `files` is the object-store ref of `ship`'s model files (None without `ship`); `submit(handle, chunk,
    shared)` starts a chunk on an idle actor and returns its ref (`shared`: put in the object store
    once, passed to every task); `receive(result, actor_index)` turns a finished chunk into log records,
    of which those whose id is in neither `log` nor `skip` are appended. Before each submit `stop()`
    may end the run at a chunk boundary. Afterwards each actor's `close` method (if named) is called
    and the actors are killed. Returns (records appended, stopped early). A Ray failure beyond
    `RESTARTS` restarts is one line naming `label`, the `noun` that failed, and the log to resume from.
    """
    try:
        files = ray.put(model_files(ship)) if ship else None
        shared_ref = ray.put(shared) if shared is not None else None
        remote = ray.remote(actor).options(max_restarts=RESTARTS, max_task_retries=RESTARTS, **resources)
        actors = [remote.remote(files, *init) for _ in range(count)]
        busy: dict[Any, int] = {}
        ready: list = []
        queue = list(chunks)
        appended, stopped = 0, False
        while queue or busy:
            for a in range(len(actors)):
                if queue and a not in busy.values():
                    if stop is not None and stop():
                        stopped = True
                        queue.clear()
                        break
                    busy[submit(actors[a], queue.pop(0), shared_ref)] = a
            if not busy:
                break
            ready, _ = ray.wait(list(busy), num_returns=1)
            a = busy.pop(ready[0])
            for record in receive(ray.get(ready[0]), a):
                if record[log.id_key] not in skip and record[log.id_key] not in log.done:
                    log.append(record)
                    appended += 1
        if close is not None:
            ray.get([getattr(handle, close).remote() for handle in actors])
        for handle in actors:
            ray.kill(handle)
        # every handle and object ref goes while the driver is still connected (module docstring)
        del actors, busy, files, shared_ref, ready
        gc.collect()
    except ray.exceptions.RayError as exc:
        raise PipelineError(f"{label}: a Ray {noun} failed beyond {RESTARTS} restarts ({raycluster.one_line(exc)}); "
                            f"finished chunks are kept in {log.path}: rerun to resume") from None
    return appended, stopped


def _unwrap(exc: BaseException) -> BaseException:
    """A PipelineError raised inside a Ray task, or the Ray error itself."""
    seen = exc
    while seen is not None:
        if isinstance(seen, PipelineError):
            return PipelineError(str(seen))
        cause = getattr(seen, "cause", None) or seen.__cause__
        seen = cause if cause is not seen else None
    text = str(exc)
    if "PipelineError: " in text:
        return PipelineError(text.rsplit("PipelineError: ", 1)[1].strip().splitlines()[0])
    return exc


@contextmanager
def task_errors() -> Iterator[None]:
    """A PipelineError raised inside a Ray task comes back wrapped by Ray: raise it as the one line it was."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - a task's PipelineError comes back wrapped by Ray
        err = _unwrap(exc)
        if err is exc:
            raise
        raise err from None

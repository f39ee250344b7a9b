"""Sharded chain generation: N worker processes, one log per worker, one merged `chains.jsonl`.

Why this shape: `generate_chains` already cuts the question list into fixed chunks
and samples chunk i with its own seed, so *which process* samples a chunk cannot
change its records. Worker r of N owns the chunks i = r (mod N) and appends them
to its own shard log (`shards/<source>.<r>-of-<N>.jsonl`); at the end the merge
reads every shard log, sorts in `canonical_order` and writes `chains.jsonl` in one
atomic rename. Consequences:

- the merged file is byte-identical for any N, and after any kill and resume;
- `chains.jsonl` is only ever written whole: a killed run leaves shard logs and
  no `chains.jsonl` (or the previous complete one), never a partial one;
- a resumed run skips every record already in *any* log (the merged file and all
  shard logs, whatever N wrote them), so N may change between a kill and a resume.

Threads: every worker sets torch to the same `threads` whatever N. Measured on
this project's models (2-core CPU, torch 2.13): logits are bitwise identical at
1, 2 and 4 threads but not at 3, so dividing a thread budget among workers could
change records; a fixed count per worker cannot.

Processes: workers are spawned (fresh interpreters: CUDA and OpenMP state do not
survive fork) and get SIGKILL when the stage process dies (Linux
PR_SET_PDEATHSIG), so a `kill -9` of the stage leaves no worker appending to a log
that the rerun opens; an exclusive lock on each log refuses a second writer anyway.

GPU: worker r sees only the r-th visible GPU (`CUDA_VISIBLE_DEVICES`) and runs its
own engine there (hf, or vllm: one independent vLLM engine per GPU). vLLM's own
data parallelism is not used: its offline `LLM(data_parallel_size>1)` refuses
single-process use ("may hang"), and its multi-process DP ranks must finish in
lockstep; independent replicas over disjoint chunks need neither. Not run on a GPU
here (no GPU on the development machine).
"""
from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import queue
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import AbstractSet, Any, Iterator, Sequence

from transformers import PreTrainedTokenizerBase

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import JsonlAppender, iter_jsonl, repair_jsonl, write_jsonl
from decision_pipeline.common.log import info, progress
from decision_pipeline.decision.generate.generation import canonical_order, generate_chains
from decision_pipeline.lm.launch import die_with_parent
from decision_pipeline.lm.backends import Backend, SamplingSettings, backend_for_model

MERGED = "chains.jsonl"
SHARD_DIR = "shards"
LOCK_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class Workers:
    """How a local model's chains are spread: `count` processes, each with `threads` torch threads."""
    model_dir: str
    backend: str
    batch_size: int
    threads: int
    count: int
    runtime: Any = None  # RuntimeParams: device and vLLM memory knobs (None = its defaults)


@dataclass(frozen=True)
class ShardJob:
    """Everything one spawned worker needs (picklable: it crosses the process boundary)."""
    out: str
    source: str
    questions: list[dict]
    settings: SamplingSettings
    chunk: int
    rank: int
    workers: Workers
    prior: frozenset[str]
    deadline: float | None
    device: str | None
    desc: str


def shard_path(out: Path, source: str, rank: int, count: int) -> Path:
    return out / SHARD_DIR / f"{source}.{rank}-of-{count}.jsonl"


def shard_logs(out: Path) -> list[Path]:
    """Every shard log in `out`, of any N (sorted, so reads are in a fixed order)."""
    return sorted((out / SHARD_DIR).glob("*.jsonl"))


@contextlib.contextmanager
def exclusive(path: Path, wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if absent); a second writer fails after `wait` s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        give_up = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > give_up:
                    raise PipelineError(f"{path}: another process is writing this log; wait for that run to end "
                                        "or stop it, then rerun") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _read_logs(out: Path) -> Iterator[tuple[Path, dict]]:
    """(file, record) from the merged log, then every shard log; a torn last line of a killed run is cut first."""
    merged = out / MERGED
    if merged.is_file():
        # written whole by `merge_logs`, never appended to, so not locked (it may be a read-only DVC
        # checkout); only a log appended by an older version of this stage can end in a torn line
        if merged.stat().st_size and not _ends_with_newline(merged) and repair_jsonl(merged):
            info("chains", f"{merged}: dropped a torn last line from the killed run")
        for _, record in iter_jsonl(merged):
            yield merged, record
    for path in shard_logs(out):
        with exclusive(path):  # waits for a dying worker of a killed run to let go
            if repair_jsonl(path):
                info("chains", f"{path}: dropped a torn last line from the killed run")
        for _, record in iter_jsonl(path):
            yield path, record


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def logged_records(out: Path) -> list[dict]:
    """Every record in `out`'s logs, once each (a record id in two logs must be the same record)."""
    seen: dict[str, tuple[Path, dict]] = {}
    for path, record in _read_logs(out):
        first = seen.setdefault(record["id"], (path, record))
        if first[1] != record:
            raise PipelineError(f"{path}: record {record['id']!r} differs from the one in {first[0]}; "
                                f"delete {out} to generate afresh")
    return [record for _, record in seen.values()]


def logged_ids(out: Path) -> frozenset[str]:
    return frozenset(r["id"] for r in logged_records(out))


def clear_logs(out: Path) -> None:
    """Drop every log in `out` (params or model changed: nothing there is resumable)."""
    (out / MERGED).unlink(missing_ok=True)
    shutil.rmtree(out / SHARD_DIR, ignore_errors=True)


def merge_logs(out: Path) -> list[dict]:
    """Write all logged records to `chains.jsonl` in canonical order (atomically), then drop the shard logs.

    A kill between the two steps leaves the merged file and the shard logs; the next
    merge reads both and writes the same bytes."""
    records = canonical_order(logged_records(out))
    write_jsonl(out / MERGED, records)
    shutil.rmtree(out / SHARD_DIR, ignore_errors=True)
    return records


def generate_in_process(out: Path, source: str, backend: Backend | None, questions: Sequence[dict],
                        settings: SamplingSettings, tok: PreTrainedTokenizerBase, chunk: int,
                        deadline: float | None = None, desc: str = "generate", shard: tuple[int, int] = (0, 1),
                        prior: AbstractSet[str] | None = None) -> dict:
    """Sample this process's chunks of `source` into its own shard log (skipping what any log holds)."""
    path = shard_path(out, source, *shard)
    prior = logged_ids(out) if prior is None else prior
    with exclusive(path), JsonlAppender(path) as log:
        return generate_chains(questions, {source: backend}, settings, tok, log, chunk, deadline,
                               progress=lambda it: progress(it, desc=desc, unit="chunk"), shard=shard, skip=prior)


def generate_sharded(out: Path, source: str, questions: Sequence[dict], settings: SamplingSettings,
                     tok: PreTrainedTokenizerBase, chunk: int, w: Workers, model=None,
                     deadline: float | None = None, desc: str = "generate") -> dict:
    """Sample `source` from the local model over `w.count` workers (in this process when 1).

    Returns the summed counts; `gen_seconds` is the slowest worker's, since the
    workers run side by side (the figure throughput is computed from)."""
    prior = logged_ids(out)
    if w.count == 1:
        backend = backend_for_model(w.backend, model, tok, w.model_dir, w.batch_size, w.runtime)
        return generate_in_process(out, source, backend, questions, settings, tok, chunk, deadline, desc,
                                   prior=prior)
    devices = worker_devices(w.count)
    jobs = [ShardJob(str(out), source, list(questions), settings, chunk, r, w, prior, deadline, devices[r],
                     f"{desc} {r + 1}/{w.count}") for r in range(w.count)]
    return combine(run_workers(jobs), parallel=True)


def combine(stats: Sequence[dict], parallel: bool) -> dict:
    """Counts summed; seconds summed for sequential parts, the longest for parts that ran side by side."""
    out = {k: sum(s[k] for s in stats) for k in ("new_records", "gen_tokens", "gen_questions")}
    seconds = [s["gen_seconds"] for s in stats]
    out["gen_seconds"] = max(seconds, default=0.0) if parallel else sum(seconds)
    out["stopped_early"] = any(s["stopped_early"] for s in stats)
    return out


def worker_devices(count: int) -> list[str | None]:
    """The GPU each worker may see (its own), or None for every worker on a CPU-only machine."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        gpus = [d.strip() for d in visible.split(",") if d.strip()]
    else:
        import torch  # device_count() does not initialise CUDA in this process
        gpus = [str(i) for i in range(torch.cuda.device_count())]
    if not gpus:
        return [None] * count
    if count > len(gpus):
        raise PipelineError(f"params.yaml: workers is {count} but {len(gpus)} GPU(s) are visible; "
                            "set generate.workers / rl_probe.workers to at most the GPU count")
    return gpus[:count]


def run_workers(jobs: Sequence[ShardJob]) -> list[dict]:
    """Start one spawned process per job, wait for all, and return their stats in rank order.

    A worker that fails stops the others (their logs stay: a rerun resumes); a
    PipelineError inside a worker comes back as the same one-line PipelineError."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    # not daemonic: a vllm engine starts processes of its own, which daemonic processes may not
    procs = {j.rank: ctx.Process(target=_worker, args=(j, results, os.getpid()), name=f"shard-{j.rank}")
             for j in jobs}
    for p in procs.values():
        p.start()
    done: dict[int, dict] = {}
    try:
        while len(done) < len(procs):
            try:
                rank, kind, payload = results.get(timeout=0.5)
            except queue.Empty:
                for rank, p in procs.items():
                    if rank not in done and p.exitcode not in (None, 0):
                        raise PipelineError(f"{jobs[0].source} generation: worker {rank + 1} of {len(procs)} died "
                                            f"(exit code {p.exitcode}); its shard log is kept: rerun to resume")
                continue
            if kind == "error":
                raise PipelineError(payload)
            if kind == "crash":
                raise RuntimeError(f"worker {rank + 1} of {len(procs)} failed:\n{payload}")
            done[rank] = payload
    finally:
        for p in procs.values():
            if p.is_alive() and len(done) < len(procs):
                p.kill()
        for p in procs.values():
            p.join()
    return [done[r] for r in sorted(done)]


def _worker(job: ShardJob, results, parent: int) -> None:
    """One worker: own GPU (if any), fixed thread count, own model copy, own shard log."""
    die_with_parent(parent)  # a kill -9 of the stage leaves no worker appending to a log
    if job.device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = job.device  # before anything initialises CUDA
    try:
        import torch

        from decision_pipeline.lm.bpe import load_tokenizer
        from decision_pipeline.lm.model import load_model
        torch.set_num_threads(job.workers.threads)
        w = job.workers
        tok = load_tokenizer(w.model_dir)
        device = w.runtime.device if w.runtime is not None else "auto"
        model = load_model(w.model_dir, device=device) if w.backend == "hf" else None
        backend = backend_for_model(w.backend, model, tok, w.model_dir, w.batch_size, w.runtime)
        stats = generate_in_process(Path(job.out), job.source, backend, job.questions, job.settings, tok,
                                    job.chunk, job.deadline, job.desc, shard=(job.rank, w.count), prior=job.prior)
        results.put((job.rank, "ok", stats))
    except PipelineError as exc:
        results.put((job.rank, "error", str(exc)))
    except BaseException:  # noqa: BLE001 - the parent reports it; the worker must not die silently
        results.put((job.rank, "crash", traceback.format_exc()))

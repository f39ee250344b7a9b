"""Throughput: drive a serving endpoint with the candidate's real prompt on real seed
documents, documents/s after a warm-up, and the linear GPU-hour extrapolation.

Why: the production run's cost decided which candidates were affordable at all; a
candidate whose extrapolated GPU-hours exceed the budget never enters the quality
comparison. In the default profile the stage serves the project's own model itself
(``python -m decision_pipeline serve`` on a free port, stopped by pid).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule


@dataclass
class ThroughputParams:
    warmup_docs: int = rule(min=0, doc="documents sent first and not timed (model load, caches)")
    measure_docs: int = rule(min=1, doc="documents timed after the warm-up")
    workload_docs: int = rule(min=1, doc="documents in the production run the GPU-hours are extrapolated to")
    nodes: int = rule(min=1, doc="nodes in the production run")
    gpus_per_node: int = rule(min=1, doc="GPUs per node")
    gpu_hour_budget: float = rule(min=0.0, doc="GPU-hours above which a candidate is unaffordable")
    server_start_timeout_s: float = rule(min=1.0, doc="seconds to wait for a self-started server to answer")
    mode: str = rule(choices=("tokens", "measured"),
                     doc="GPU-hours from the measured docs/s (`measured`: the GPU profile, on the serving GPU) or "
                         "from the run's token counts per document at `gpu_tokens_per_second` (`tokens`: the CPU "
                         "profile, where wall-clock docs/s says nothing about a GPU and changes every run)")
    gpu_tokens_per_second: float = rule(gt=0.0, doc="tokens/s (prompt + completion) one serving instance processes "
                                                    "on the target GPU: a stated assumption, used in `tokens` mode")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (bound to 0, read, released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=1) as resp:
            return bool(json.loads(resp.read()).get("data"))
    except (OSError, ValueError):
        return False


@contextmanager
def served(model_dir: str, name: str, timeout_s: float, batch_size: int = 16) -> Iterator[tuple[str, int]]:
    """Run `python -m decision_pipeline serve` for `model_dir` on a free loopback port;
    yields (base_url, pid); the process is stopped by its pid (TERM, then KILL) on exit."""
    if not Path(model_dir).is_dir():
        raise PipelineError(f"{model_dir}: model directory to serve not found; run `dvc repro base_model` "
                            "or fix serve_model in params")
    port = free_port()
    cmd = [sys.executable, "-m", "decision_pipeline", "serve", "--model", model_dir, "--host", "127.0.0.1",
           "--port", str(port), "--name", name, "--batch-size", str(batch_size)]
    env = {**os.environ, "PIPELINE_QUIET": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout_s
        while not _ready(base_url):
            if proc.poll() is not None:
                err = (proc.stderr.read() or b"").decode(errors="replace").strip().splitlines()
                raise PipelineError(f"server for {model_dir} exited ({proc.returncode}): "
                                    f"{err[-1] if err else 'no output'}")
            if time.monotonic() > deadline:
                raise PipelineError(f"server for {model_dir} did not answer on {base_url} within {timeout_s:g}s; "
                                    "raise throughput.server_start_timeout_s")
            time.sleep(0.2)
        yield base_url, proc.pid
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc.stderr:
            proc.stderr.close()


def gpu_hours(docs_per_s: float, gpus_per_instance: int, cfg: ThroughputParams) -> dict:
    """Linear extrapolation: GPU-hours = workload / docs_per_s / 3600 x GPUs one instance
    occupies; wall-clock hours spread over nodes x gpus_per_node GPUs."""
    if docs_per_s <= 0:
        raise PipelineError("throughput: measured 0 documents/s; nothing to extrapolate")
    hours = cfg.workload_docs / docs_per_s / 3600.0 * max(1, gpus_per_instance)
    total_gpus = cfg.nodes * cfg.gpus_per_node
    return {"gpu_hours": hours, "wall_hours": hours / total_gpus, "total_gpus": total_gpus,
            "affordable": hours <= cfg.gpu_hour_budget}


def measure(generator, docs: list[dict], cfg: ThroughputParams) -> dict:
    """Warm-up, then time `measure_docs` documents through `generator.reflect`; their token counts too."""
    need = cfg.warmup_docs + cfg.measure_docs
    if len(docs) < need:
        docs = (docs * (need // max(1, len(docs)) + 1))[:need]
    if cfg.warmup_docs:
        generator.reflect(docs[:cfg.warmup_docs])
    completion0, prompt0 = generator.completion_tokens, getattr(generator, "prompt_tokens", 0)
    started = time.perf_counter()
    generator.reflect(docs[cfg.warmup_docs:need])
    seconds = time.perf_counter() - started
    completion = generator.completion_tokens - completion0
    prompt = getattr(generator, "prompt_tokens", 0) - prompt0
    return {"docs": cfg.measure_docs, "seconds": seconds, "docs_per_s": cfg.measure_docs / seconds,
            "completion_tokens_per_s": completion / seconds, "prompt_tokens": prompt, "completion_tokens": completion}


MACHINE_DEPENDENT = ("seconds", "docs_per_s", "completion_tokens_per_s")


def cost(m: dict, gpus_per_instance: int, cfg: ThroughputParams) -> tuple[dict, dict]:
    """(metrics, machine-dependent timings) of one measurement under `cfg.mode`.

    `tokens`: docs/s = gpu_tokens_per_second / tokens per document, a pure function of the run's
    token counts, so the metric and the ranking repeat byte for byte; the wall-clock figures are
    returned as timings (kept out of DVC's outputs). `measured`: the wall-clock docs/s is the metric.
    """
    timings = {k: m[k] for k in MACHINE_DEPENDENT}
    tokens_per_doc = (m["prompt_tokens"] + m["completion_tokens"]) / m["docs"]
    common = {"docs": m["docs"], "prompt_tokens": m["prompt_tokens"], "completion_tokens": m["completion_tokens"],
              "tokens_per_doc": round(tokens_per_doc, 3), "mode": cfg.mode}
    if cfg.mode == "measured":
        return {**common, **timings, **gpu_hours(m["docs_per_s"], gpus_per_instance, cfg)}, timings
    if tokens_per_doc <= 0:
        raise PipelineError("throughput: the served model reported no tokens; its /completions usage is missing")
    docs_per_s = cfg.gpu_tokens_per_second / tokens_per_doc
    return {**common, "assumed_gpu_tokens_per_second": cfg.gpu_tokens_per_second,
            "docs_per_s": round(docs_per_s, 6), **gpu_hours(docs_per_s, gpus_per_instance, cfg)}, timings

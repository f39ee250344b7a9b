"""hf decode speed, ms per step, eager against the static-cache compiled modes of the hf backend.

Why: eager `generate` of a 4B model was launch-bound on one H200 (76.6 ms per step at batch 1, 81.6 at
batch 64). This measures the same model shapes (random bf16 weights) with each `runtime.hf_decode`
mode, using the backend's own `compile_kwargs` and sampling processor, so the GPU profile can pick
the fastest and `hours` can use it. Each step is timed by a stopping criterion that synchronises the
device (eager decoding synchronises every step anyway); the figure is the median step after the
first two. Compiled modes run once to compile (reported as compile seconds) and are timed on a
second call of the same shape (a static cache of another length would recompile). `--deadline-s`
skips a measurement that would not finish in time; every row is written to `--json` when done.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.backends.hf import DECODE_MODES, compile_kwargs
from decision_pipeline.lm.sampling import TemperatureTopP
from decision_pipeline.preflight.model_dirs import QWEN3_4B, TINY, build_model, read_config

GIB = 1024 ** 3
# seconds one (mode, batch) is expected to take to compile on a 16-core host: a measurement starts only when this
# much is left (kept low: a phase stopped at its time limit still keeps the rows it wrote)
COMPILE_BUDGET_S = {"eager": 3.0, "static_cudagraphs": 20.0, "static_inductor": 40.0}
MODES_BY_VALUE = ("eager", "static_inductor", "static_cudagraphs")   # transformers' documented path first


class _StepClock:
    """A StoppingCriteria that records a synchronised timestamp per generated token and never stops."""

    def __init__(self, dev: torch.device):
        self.dev, self.stamps = dev, []

    def __call__(self, input_ids, scores, **kwargs):
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
        self.stamps.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def _generate(model, ids: torch.Tensor, steps: int, decode: str) -> list[float]:
    """One sampled generate of exactly `steps` new tokens; the per-step seconds."""
    from transformers import LogitsProcessorList, StoppingCriteriaList
    clock = _StepClock(ids.device)
    extra = compile_kwargs(decode, ids.device) if decode != "eager" else {}
    torch.manual_seed(0)
    model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps, min_new_tokens=steps,
                   do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                   logits_processor=LogitsProcessorList([TemperatureTopP(0.6, 0.95)]),
                   stopping_criteria=StoppingCriteriaList([clock]), eos_token_id=[1], pad_token_id=0, **extra)
    return [b - a for a, b in zip(clock.stamps, clock.stamps[1:])]


def measure(model, decode: str, batch: int, prompt: int, steps: int, vocab: int) -> dict:
    """ms per decode step (median after the first two) for one mode and batch; compiled modes warm up first."""
    dev = model.device
    g = torch.Generator().manual_seed(batch)
    ids = torch.randint(10, vocab, (batch, prompt), generator=g).to(dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    _generate(model, ids, steps if decode != "eager" else 4, decode)   # compiles (or warms the kernels)
    warm_s = time.perf_counter() - start
    gaps = _generate(model, ids, steps, decode)[2:]
    ms = statistics.median(gaps) * 1000
    return {"decode": decode, "batch": batch, "prompt": prompt, "steps": steps, "ms_per_step": round(ms, 2),
            "ms_p90": round(sorted(gaps)[int(0.9 * (len(gaps) - 1))] * 1000, 2),
            "tokens_per_s": round(batch * 1000 / ms, 1), "warmup_s": round(warm_s, 1),
            "peak_gib": round(torch.cuda.max_memory_allocated() / GIB, 2) if dev.type == "cuda" else None}


def run(tiny: bool, modes: list[str], batches: list[int], prompt: int, steps: int, deadline_s: float,
        json_out: Path | None) -> list[dict]:
    """Every (mode, batch) that fits the deadline, in order; rows written to `json_out` as they finish."""
    started = time.monotonic()
    cuda = torch.cuda.is_available() and not tiny
    dev = torch.device("cuda" if cuda else "cpu")
    config = read_config(QWEN3_4B, TINY if tiny else None)
    model = build_model({**config, "bos_token_id": None, "eos_token_id": 1, "pad_token_id": 0}, dev,
                        torch.bfloat16 if cuda else torch.float32)
    rows: list[dict] = []
    for decode in modes:
        for batch in batches:
            left = deadline_s - (time.monotonic() - started)
            need = COMPILE_BUDGET_S[decode] + 2 * steps * 0.08
            if left < need:
                rows.append({"decode": decode, "batch": batch, "skipped": f"{left:.0f} s left, needs ~{need:.0f}"})
            else:
                try:
                    rows.append(measure(model, decode, batch, prompt, steps, int(config["vocab_size"])))
                except Exception as exc:   # a mode that fails to compile is a result too: recorded, not fatal
                    rows.append({"decode": decode, "batch": batch, "error": f"{type(exc).__name__}: {exc}"[:400]})
            print(json.dumps(rows[-1]), flush=True)
            if json_out is not None:
                json_out.write_text(json.dumps({"device": torch.cuda.get_device_name(0) if cuda else "cpu",
                                                "torch": torch.__version__, "rows": rows}, indent=1))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m decision_pipeline decode-bench",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="CPU, tiny config (CI)")
    ap.add_argument("--modes", default=",".join(MODES_BY_VALUE))
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--deadline-s", type=float, default=600.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if not args.tiny and not torch.cuda.is_available():
        print(f"decode bench: torch {torch.__version__} sees no GPU; pass --tiny for the CPU check", file=sys.stderr)
        return 2
    modes = args.modes.split(",")
    bad = [m for m in modes if m not in DECODE_MODES]
    if bad:
        print(f"decode bench: mode {bad[0]!r} is unknown; use {', '.join(DECODE_MODES)}", file=sys.stderr)
        return 2
    try:
        run(args.tiny, modes, [int(b) for b in args.batches.split(",")], args.prompt, args.steps, args.deadline_s,
            args.json)
    except PipelineError as exc:
        print(f"decode bench: {exc}", file=sys.stderr)
        return 2
    return 0


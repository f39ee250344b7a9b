"""transformers `generate`, batched with left padding; CPU or GPU.

`decode` (params `runtime.hf_decode`): `eager`, or a static KV cache with a `torch.compile`d forward:
`static_cudagraphs` (graph capture replayed as CUDA graphs, no code generation: compiles in seconds)
or `static_inductor` (inductor kernels + CUDA graphs, "reduce-overhead": minutes to compile). Why: eager decoding of a 4B model is launch-bound
(measured on one H200: 76.6 ms per step at batch 1 and 81.6 at batch 64, flat in batch size), so
the per-step cost is kernel launches, not arithmetic. Shapes are kept stable so the graph compiles
once per (batch, bucket): prompts are left-padded to a multiple of `PROMPT_BUCKET` and a short last
batch is filled with copies of its first row (their outputs are dropped). Greedy tokens equal the
eager path's (tests/lm/test_hf_compile.py); sampled tokens can differ from eager by the RNG draw order.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import torch
from transformers import LogitsProcessorList, PreTrainedModel, PreTrainedTokenizerBase

from decision_pipeline.common.log import progress
from decision_pipeline.lm.backends import Completion, SamplingSettings
from decision_pipeline.lm.readout import pad_left
from decision_pipeline.lm.sampling import TemperatureTopP

PROMPT_BUCKET = 64   # compiled mode: prompt widths rounded up to this, so a graph is reused across batches


DECODE_MODES = ("eager", "static_cudagraphs", "static_inductor")


def compile_backend(decode: str, device: torch.device) -> str:
    """The torch.compile backend of a decode mode on a device; on CPU (tests, no CUDA graphs) the same
    static-cache graph capture runs through `aot_eager`."""
    if decode not in DECODE_MODES[1:]:
        raise ValueError(f"decode mode {decode!r} is not one of {', '.join(DECODE_MODES)}")
    if device.type != "cuda":
        return "aot_eager"
    return "cudagraphs" if decode == "static_cudagraphs" else "inductor"


def compile_kwargs(decode: str, device: torch.device) -> dict:
    """`generate` kwargs of a compiled decode mode: a static cache and the compiled forward (transformers
    compiles only on accelerators unless `_compile_all_devices` is set, which the CPU tests need)."""
    from transformers import CompileConfig
    backend = compile_backend(decode, device)
    cfg = CompileConfig(fullgraph=True, dynamic=False, backend=backend,
                        mode="reduce-overhead" if backend == "inductor" else None)
    if device.type != "cuda":
        cfg._compile_all_devices = True
    return {"cache_implementation": "static", "compile_config": cfg}


def pad_for_compile(seqs: list[Sequence[int]], rows: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and mask of exactly `rows` rows (copies of the first row fill a short batch) and a
    width rounded up to PROMPT_BUCKET: the static cache and the compiled graph keep one shape."""
    filled = list(seqs) + [seqs[0]] * (rows - len(seqs))
    ids, mask = pad_left(filled, pad_id)
    extra = -ids.shape[1] % PROMPT_BUCKET
    if extra:
        ids = torch.cat([torch.full((rows, extra), pad_id, dtype=ids.dtype), ids], dim=1)
        mask = torch.cat([torch.zeros((rows, extra), dtype=mask.dtype), mask], dim=1)
    return ids, mask


class HFBackend:
    name = "hf"

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, batch_size: int = 16,
                 decode: str = "eager"):
        if decode not in DECODE_MODES:
            raise ValueError(f"decode mode {decode!r} is not one of {', '.join(DECODE_MODES)}")
        self.model, self.tokenizer, self.batch_size, self.decode = model, tokenizer, batch_size, decode

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]], settings: SamplingSettings) -> list[Completion]:
        stops = set(settings.stop_token_ids) or {self.tokenizer.eos_token_id}
        pad = self.tokenizer.pad_token_id
        jobs = [(p, s) for p in range(len(prompt_ids)) for s in range(settings.n)]
        order = sorted(range(len(jobs)), key=lambda j: (len(prompt_ids[jobs[j][0]]), j))
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        results: list[Completion | None] = [None] * len(jobs)
        compiled = self.decode != "eager"
        extra = compile_kwargs(self.decode, self.model.device) if compiled else {}
        for b, batch in enumerate(progress(batches, desc="generate", unit="batch")):
            seqs = [prompt_ids[jobs[j][0]] for j in batch]
            if compiled:
                ids, mask = pad_for_compile(seqs, min(self.batch_size, len(jobs)), pad)
            else:
                ids, mask = pad_left(seqs, pad)
            torch.manual_seed(settings.seed * 100_003 + b)  # per-batch seed: reruns reproduce
            started = time.perf_counter()
            sampled = settings.temperature > 0
            # temperature and top-p in one processor that avoids a full-vocabulary sort per step
            warp = LogitsProcessorList([TemperatureTopP(settings.temperature, settings.top_p)]) if sampled else None
            out = self.model.generate(
                input_ids=ids.to(self.model.device), attention_mask=mask.to(self.model.device), max_new_tokens=settings.max_new_tokens,
                do_sample=sampled, temperature=1.0 if sampled else None, top_p=1.0 if sampled else None,
                top_k=0 if sampled else None, logits_processor=warp,
                eos_token_id=sorted(stops), pad_token_id=pad, **extra)
            seconds = (time.perf_counter() - started) / len(batch)
            for row, j in enumerate(batch):
                gen = out[row, ids.shape[1]:].cpu().tolist()
                cut = next((k + 1 for k, t in enumerate(gen) if t in stops), None)
                tokens = gen[:cut] if cut else gen
                p, s = jobs[j]
                results[j] = Completion(
                    prompt_index=p, sample_index=s, token_ids=tokens,
                    text=self.tokenizer.decode(tokens, skip_special_tokens=False),
                    finish_reason="stop" if cut else "length", prompt_tokens=len(prompt_ids[p]),
                    seconds=float(np.round(seconds, 6)))
        return [c for c in results if c is not None]

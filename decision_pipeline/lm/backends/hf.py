"""transformers `generate`, batched with left padding; CPU or GPU."""
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


class HFBackend:
    name = "hf"

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, batch_size: int = 16):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]], settings: SamplingSettings) -> list[Completion]:
        stops = set(settings.stop_token_ids) or {self.tokenizer.eos_token_id}
        pad = self.tokenizer.pad_token_id
        jobs = [(p, s) for p in range(len(prompt_ids)) for s in range(settings.n)]
        order = sorted(range(len(jobs)), key=lambda j: (len(prompt_ids[jobs[j][0]]), j))
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        results: list[Completion | None] = [None] * len(jobs)
        for b, batch in enumerate(progress(batches, desc="generate", unit="batch")):
            seqs = [prompt_ids[jobs[j][0]] for j in batch]
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
                eos_token_id=sorted(stops), pad_token_id=pad)
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

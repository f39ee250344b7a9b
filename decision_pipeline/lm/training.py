"""Pretraining the small GPT: exact-budget packing, a seeded loop, held-out evaluation.

Why a hand loop and not `Trainer`: the curation experiment needs three things
the generic trainer hides — packing to *exactly* the token budget, a document
order we control (the noise-floor re-orderings), and evaluation that iterates
the whole dev set deterministically. The loop is ~40 lines; schedules come
from transformers.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from transformers import PreTrainedModel, get_cosine_schedule_with_warmup

from decision_pipeline.common.log import progress


def pack_tokens(docs_ids: Sequence[Sequence[int]], eos_id: int, budget: int) -> np.ndarray:
    """Concatenate documents (each followed by EOS) and cut at exactly `budget` tokens."""
    dtype = np.uint16 if max((max(d) for d in docs_ids if len(d)), default=0) < 2**16 else np.uint32
    out = np.empty(budget, dtype=dtype)
    pos = 0
    for ids in docs_ids:
        piece = list(ids) + [eos_id]
        take = min(len(piece), budget - pos)
        out[pos:pos + take] = piece[:take]
        pos += take
        if pos == budget:
            return out
    raise ValueError(f"documents hold {pos} tokens, fewer than the budget {budget}")


@dataclass
class TrainSettings:
    seq_len: int
    batch_size: int
    lr: float
    warmup_steps: int
    epochs: int
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    bf16: bool = True
    seed: int = 0


def train_on_tokens(model: PreTrainedModel, tokens: np.ndarray, s: TrainSettings,
                    desc: str = "pretrain", on_step: Callable[[int, float], None] | None = None) -> list[dict]:
    """Train on consecutive windows of `tokens` (order fixed by `s.seed`); return the loss log."""
    torch.manual_seed(s.seed)
    n_windows = (len(tokens) - 1) // s.seq_len
    windows = torch.from_numpy(tokens[: n_windows * s.seq_len + 1].astype(np.int64))
    rng = np.random.default_rng(s.seed)
    schedule = [rng.permutation(n_windows) for _ in range(s.epochs)]
    order = np.concatenate(schedule)
    steps = max(1, len(order) // s.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, betas=(0.9, 0.95), weight_decay=s.weight_decay)
    sched = get_cosine_schedule_with_warmup(opt, min(s.warmup_steps, steps // 2), steps)
    model.train()
    log = []
    started = time.perf_counter()
    for step in progress(range(steps), desc=desc, unit="step"):
        idx = order[step * s.batch_size:(step + 1) * s.batch_size]
        batch = torch.stack([windows[i * s.seq_len:(i + 1) * s.seq_len + 1] for i in idx])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s.bf16 and not torch.cuda.is_available()):
            loss = model(input_ids=batch[:, :-1], labels=batch[:, :-1].clone(), use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        log.append({"step": step + 1, "loss": round(float(loss.detach()), 5), "lr": sched.get_last_lr()[0],
                    "tokens": (step + 1) * s.batch_size * s.seq_len,
                    "seconds": round(time.perf_counter() - started, 3)})
        if on_step:
            on_step(step + 1, float(loss.detach()))
    model.eval()
    return log


@torch.no_grad()
def heldout_nll(model: PreTrainedModel, docs_ids: Sequence[Sequence[int]], seq_len: int,
                batch_size: int = 16) -> tuple[float, int]:
    """Summed NLL (nats) and predicted-token count over every document, in order.

    Each document is cut into consecutive windows of `seq_len`; every token but
    a window's first is predicted once. Deterministic: no sampling of batches.
    """
    windows = [list(d[i:i + seq_len]) for d in docs_ids for i in range(0, len(d), seq_len) if len(d[i:i + seq_len]) > 1]
    total, count = 0.0, 0
    for b in range(0, len(windows), batch_size):
        chunk = windows[b:b + batch_size]
        width = max(len(w) for w in chunk)
        ids = torch.zeros((len(chunk), width), dtype=torch.long)
        labels = torch.full((len(chunk), width), -100, dtype=torch.long)
        for r, w in enumerate(chunk):
            ids[r, :len(w)] = torch.tensor(w)
            labels[r, :len(w)] = torch.tensor(w)
        logits = model(input_ids=ids, use_cache=False).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        target = labels[:, 1:]
        mask = target != -100
        picked = logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        total += float(-(picked * mask).sum())
        count += int(mask.sum())
    return total, count


def perplexity_report(nll_sum: float, n_tokens: int, n_bytes: int) -> dict:
    """Loss (nats/token), perplexity and bits per byte (tokenizer-independent)."""
    loss = nll_sum / max(1, n_tokens)
    return {"loss": round(loss, 6), "ppl": round(math.exp(loss), 4),
            "bpb": round(nll_sum / (math.log(2) * max(1, n_bytes)), 6), "tokens": n_tokens}

"""Bytes per kept logit of each training loss head, measured by tracking allocations on CPU.

Why measured, not guessed: the loss head (LM-head logits -> log-probs -> backward) is the largest
training term of a 152k-vocabulary model, and its size depends on every upcast, copy and saved
tensor of the exact loss code. A small TorchDispatchMode adds each new storage's bytes when an op
creates it and subtracts them when the storage dies (weakref.finalize), so its peak is the loss
head's peak with the same Python references the trainers hold. Each head holds the same Python references as
the code it stands for during backward (a trainer's `compute_loss` returns the loss, so its locals,
the bf16 logits among them, are gone; the old smoke's loop still held its fp32 logits). Every large
tensor of a loss head is [tokens, vocabulary]-shaped, so bytes per logit do not depend on the size: they are measured as the
slope between two small real shapes (T 256 and 512, V 2048, bf16 LM head) in well under a second.
Checked against one H200 (tests/fixtures/h200_memory.json): the hf loss traces to 12 bytes and the
old smoke's fp32 loop to 16, the two slopes its rows show. The one path that cannot run here, TRL's
Triton `selective_log_softmax`, has its measured constant in plan.py.
"""
from __future__ import annotations

import weakref
from functools import lru_cache, partial
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

TRACE_VOCAB = 2048
TRACE_HIDDEN = 8


class PeakTracker(TorchDispatchMode):
    """Live bytes of the storages created inside the mode, and their peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._sizes: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key = id(storage)
                if key not in self._sizes:
                    self._sizes[key] = storage.nbytes()
                    self.live += storage.nbytes()
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(storage, self._free, key)
        return out

    def _free(self, key: int) -> None:
        self.live -= self._sizes.pop(key, 0)


def _lm_head(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.linear(hidden, weight)


def hf_loss(hidden: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """transformers' causal-LM loss (`model(..., labels=ids).loss`): full logits, fp32 upcast."""
    from transformers.loss.loss_utils import ForCausalLMLoss
    return ForCausalLMLoss(_lm_head(hidden, weight), ids, weight.shape[0])


def joint_batch(ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """A joint batch over `ids` [rows, n]: every position weighted, one readout row each at n // 4."""
    from decision_pipeline.decision.sft.data import MAX_LABELS
    rows, n = ids.shape
    pad = MAX_LABELS - 4
    return {"input_ids": ids, "loss_weights": torch.ones(rows, n), "readout_pos": torch.full((rows,), n // 4),
            "readout_label_ids": torch.tensor([[1, 2, 3, 4] + [-1] * pad] * rows),
            "readout_target": torch.tensor([[0.7, 0.1, 0.1, 0.1] + [0.0] * pad] * rows)}


def joint_loss(hidden: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor, chunk: int = 0) -> torch.Tensor:
    """The SFT stage's loss (`JointSFTTrainer.compute_loss` -> `sft/loss.py` `chunked_sums`): chain NLL with
    loss weights plus the soft-target readout, the LM head applied `chunk` positions at a time (0: one chunk)."""
    from decision_pipeline.decision.sft.loss import chunked_sums, mean_losses
    chain, readout = mean_losses(chunked_sums(hidden, lambda h: _lm_head(h, weight), joint_batch(ids), chunk))
    return chain + 2.0 * readout


def _ratio_loss(logp: torch.Tensor) -> torch.Tensor:
    return -(torch.exp(logp - logp.detach())).mean()


def fp32_log_softmax(hidden: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor) -> None:
    """The first device smoke's stand-in GRPO loss (not TRL's): fp32 `log_softmax` + gather, its backward
    run while the loop still holds the fp32 logits (as that loop did)."""
    logits = _lm_head(hidden, weight)[:, :-1].float()
    logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    loss = _ratio_loss(logp)
    loss.backward()


def selective_log_softmax_torch(hidden: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """TRL's `selective_log_softmax` where its Triton kernel does not run (the per-row bf16 fallback)."""
    from trl.trainer.utils import selective_log_softmax
    return _ratio_loss(selective_log_softmax(_lm_head(hidden, weight)[:, :-1], ids[:, 1:]))


LOSS_HEADS: dict[str, Callable] = {"hf_loss": hf_loss, "joint": joint_loss, "fp32_log_softmax": fp32_log_softmax,
                                   "selective_log_softmax_torch": selective_log_softmax_torch}


def _peak(loss: Callable, tokens: int, hidden_size: int = TRACE_HIDDEN, rows: int = 1) -> int:
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(rows, tokens + 1, hidden_size, generator=g).to(torch.bfloat16).requires_grad_()
    weight = torch.randn(TRACE_VOCAB, hidden_size, generator=g).to(torch.bfloat16)
    ids = torch.randint(0, TRACE_VOCAB, (rows, tokens + 1), generator=g)
    tracker = PeakTracker()
    with tracker:
        out = loss(hidden, weight, ids)
        if out is not None:       # a head that returns its loss holds nothing else during backward
            out.backward()
    return tracker.peak


@lru_cache(maxsize=None)
def bytes_per_logit(name: str) -> float:
    """Peak bytes per kept logit of a loss head, forward and backward (the slope between two shapes)."""
    loss = LOSS_HEADS[name]
    small, large = _peak(loss, 256), _peak(loss, 512)
    return (large - small) / (256 * TRACE_VOCAB)


def chunked_peak(tokens: int, chunk: int, hidden_size: int = TRACE_HIDDEN, rows: int = 1) -> int:
    """Traced peak bytes of the joint loss over `rows` x `tokens` positions, `chunk` positions at a time."""
    return _peak(partial(joint_loss, chunk=chunk), tokens, hidden_size, rows)


@lru_cache(maxsize=None)
def chunked_constants() -> tuple[float, float, float]:
    """(bytes per logit of one chunk, bytes per token, bytes per token and hidden unit) of the chunked joint loss
    (more than one chunk: each under checkpoint). Its peak is one chunk's logits during that chunk's backward
    plus what grows with the tokens: the hidden state (the LM head's input), its gradient gathered from every
    chunk, and the per-position targets and weights. Slopes between five small shapes (tokens 512/1024, chunk
    32/64, hidden 8/32); a difference of differences, so that sizes that grow with the hidden size alone (the
    trace counts views of the LM-head weight, made before it started, as new storages) cancel."""
    narrow = chunked_peak(1024, 32)
    per_logit = (chunked_peak(1024, 64) - narrow) / (32 * TRACE_VOCAB)
    per_token = (narrow - chunked_peak(512, 32)) / 512
    wide_per_token = (chunked_peak(1024, 32, 32) - chunked_peak(512, 32, 32)) / 512
    per_token_hidden = (wide_per_token - per_token) / (32 - TRACE_HIDDEN)
    return per_logit, per_token - TRACE_HIDDEN * per_token_hidden, per_token_hidden

"""The fast readout: option-label logits at the answer position, one forward pass.

Works from exact token ids, so the post-chain readout scores precisely the
chain the model sampled (no re-tokenising of decoded text).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from transformers import PreTrainedModel

from decision_pipeline.common.log import progress

DEFAULT_BATCH_TOKENS = 8192  # runtime.readout_batch_tokens of the default profile


def pad_left(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad id lists into (input_ids, attention_mask) so the last column is each answer position."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, width - len(seq):] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, width - len(seq):] = 1
    return ids, mask


def token_batches(lengths: Sequence[int], batch_tokens: int, max_rows: int) -> list[list[int]]:
    """Indices grouped into forward batches of at most `batch_tokens` padded tokens and `max_rows` rows.

    Sorted by length (stable: equal lengths keep input order), so a batch pads to its own
    longest row and its cost is rows x that length; a single prefix over the budget runs alone.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    for i in np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable").tolist():
        width = max(1, int(lengths[i]))  # ascending: the newest row is the batch's longest
        if current and ((len(current) + 1) * width > batch_tokens or len(current) >= max_rows):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def _last_logits(model: PreTrainedModel, prefixes: Sequence[Sequence[int]], pad_id: int, batch_size: int,
                 batch_tokens: int, desc: str):
    """Yield (batch indices, [rows, vocab] logits of the token after each prefix).

    `logits_to_keep=1` makes the LM head project only the last position: the full
    `[rows, length, vocab]` tensor (39 GB in bf16 for 64 x 2,000 tokens of a 152k
    vocabulary) is never built.
    """
    batches = token_batches([len(p) for p in prefixes], batch_tokens, batch_size)
    for batch in progress(batches, desc=desc, unit="batch"):
        ids, mask = pad_left([prefixes[i] for i in batch], pad_id)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        dev = model.device
        out = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), position_ids=position_ids.to(dev),
                    logits_to_keep=1, use_cache=False)  # no KV cache: ~144 KiB/token on a 4B model
        yield batch, out.logits[:, -1, :]


@torch.no_grad()
def next_token_logits(model: PreTrainedModel, prefixes: Sequence[Sequence[int]], pad_id: int,
                      batch_size: int = 32, desc: str = "readout",
                      batch_tokens: int = DEFAULT_BATCH_TOKENS) -> torch.Tensor:
    """Full-vocabulary logits of the token after each prefix, shape [n, vocab] (float32), in input order."""
    out = [(batch, logits.float().cpu()) for batch, logits in
           _last_logits(model, prefixes, pad_id, batch_size, batch_tokens, desc)]
    result = torch.empty((len(prefixes), out[0][1].shape[-1]), dtype=torch.float32)
    for batch, logits in out:
        result[torch.as_tensor(batch)] = logits
    return result


@torch.no_grad()
def label_logits(model: PreTrainedModel, prefixes: Sequence[Sequence[int]],
                 label_ids: Sequence[Sequence[int]], pad_id: int, batch_size: int = 32,
                 desc: str = "readout", batch_tokens: int = DEFAULT_BATCH_TOKENS) -> list[np.ndarray]:
    """For each prefix, the logits of its own option-label tokens (ragged list, input order).

    Only the label columns leave the device: no [n, vocab] table is kept (4.9 GB in fp32 for
    8,000 questions of a 152k vocabulary)."""
    result: list[np.ndarray | None] = [None] * len(prefixes)
    for batch, logits in _last_logits(model, prefixes, pad_id, batch_size, batch_tokens, desc):
        for row, i in enumerate(batch):
            result[i] = logits[row, list(label_ids[i])].float().cpu().numpy().astype(np.float64)
    return result


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


@torch.no_grad()
def continuation_nll(model: PreTrainedModel, prefixes: Sequence[Sequence[int]],
                     continuations: Sequence[Sequence[int]], pad_id: int, batch_size: int = 16) -> tuple[float, int]:
    """Summed NLL (nats) of each continuation given its prefix, and the token count."""
    total, count = 0.0, 0
    for b in range(0, len(prefixes), batch_size):
        seqs = [list(p) + list(c) for p, c in zip(prefixes[b:b + batch_size], continuations[b:b + batch_size])]
        ids, mask = pad_left(seqs, pad_id)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        dev = model.device
        # only the positions that predict a continuation token go through the LM head
        keep = 1 + max(len(c) for c in continuations[b:b + batch_size])
        logp = torch.log_softmax(model(input_ids=ids.to(dev), attention_mask=mask.to(dev),
                                       position_ids=position_ids.to(dev),
                                       logits_to_keep=keep, use_cache=False).logits.float(), -1).cpu()
        for row, c in enumerate(continuations[b:b + batch_size]):
            n = len(c)
            if n == 0:
                continue
            width = ids.shape[1]
            target = ids[row, width - n:]
            pred = logp[row, keep - n - 1:keep - 1]
            total += float(-pred.gather(-1, target.unsqueeze(-1)).sum())
            count += n
    return total, count

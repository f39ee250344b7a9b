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


def pad_left(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad id lists into (input_ids, attention_mask) so the last column is each answer position."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, width - len(seq):] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, width - len(seq):] = 1
    return ids, mask


@torch.no_grad()
def next_token_logits(model: PreTrainedModel, prefixes: Sequence[Sequence[int]], pad_id: int,
                      batch_size: int = 32, desc: str = "readout") -> torch.Tensor:
    """Full-vocabulary logits of the token after each prefix, shape [n, vocab] (float32)."""
    out = []
    order = np.argsort([len(p) for p in prefixes], kind="stable")  # similar lengths batch together
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for batch in progress(batches, desc=desc, unit="batch"):
        ids, mask = pad_left([prefixes[i] for i in batch], pad_id)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        dev = model.device
        logits = model(input_ids=ids.to(dev), attention_mask=mask.to(dev),
                       position_ids=position_ids.to(dev)).logits[:, -1, :]
        out.append((batch, logits.float().cpu()))
    result = torch.empty((len(prefixes), out[0][1].shape[-1]), dtype=torch.float32)
    for batch, logits in out:
        result[torch.as_tensor(batch)] = logits
    return result


def label_logits(model: PreTrainedModel, prefixes: Sequence[Sequence[int]],
                 label_ids: Sequence[Sequence[int]], pad_id: int, batch_size: int = 32,
                 desc: str = "readout") -> list[np.ndarray]:
    """For each prefix, the logits of its own option-label tokens (ragged list)."""
    full = next_token_logits(model, prefixes, pad_id, batch_size, desc)
    return [full[i, list(ids)].numpy().astype(np.float64) for i, ids in enumerate(label_ids)]


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
        logp = torch.log_softmax(model(input_ids=ids.to(dev), attention_mask=mask.to(dev),
                                       position_ids=position_ids.to(dev)).logits.float(), -1).cpu()
        for row, c in enumerate(continuations[b:b + batch_size]):
            n = len(c)
            if n == 0:
                continue
            width = ids.shape[1]
            target = ids[row, width - n:]
            pred = logp[row, width - n - 1:width - 1]
            total += float(-pred.gather(-1, target.unsqueeze(-1)).sum())
            count += n
    return total, count

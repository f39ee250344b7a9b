"""The joint SFT loss (chain LM loss + soft-target readout) without full-vocabulary logits.

Why chunked: the joint loss scores every position, and `[tokens, vocabulary]` logits are the largest
tensor of a training step: 32,768 tokens x 151,936 ids took 65 GiB in the memory plan (14 bytes per
logit), more than the model, its adapters and its activations together. Here the model returns its
last hidden state (no logits: `logits_to_keep` is an empty index), and the LM head is applied to
`chunk` positions of each row at a time. With more than one chunk each chunk runs under
`torch.utils.checkpoint`, so backward recomputes its logits and at most one chunk's logits (and
their gradients) exist at any moment. The readout part gathers only the option labels' logits at the
readout position, from the chunk that holds it.

One chunk covering the row is the old code exactly (the same LM-head call on the same tensor, the
same cross-entropy and sums, no checkpoint): the default CPU profile's numbers do not move.
`logit_sums` keeps the full-logits form as the reference the tests compare with.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class JointSums(NamedTuple):
    """A batch's loss sums: weighted next-token NLL, its weight, and each readout row's loss (None: none)."""
    nll_sum: torch.Tensor
    weight_sum: torch.Tensor
    readout: torch.Tensor | None


def _chain_nll(logits: torch.Tensor, targets: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Sum of weighted next-token NLL of `logits` [rows, n, vocab] predicting `targets` [rows, n].

    fp32 logits (CPU) are used as they are; lower-precision logits (bf16 on a GPU) are cast to fp32
    only at the positions that carry loss, so no fp32 copy is made for padding (a 152k vocabulary:
    0.6 MB per position).
    """
    if logits.dtype != torch.float32:
        keep = w > 0
        token_nll = F.cross_entropy(logits[keep].float(), targets[keep], reduction="none")
        return (token_nll * w[keep]).sum()
    token_nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                reduction="none").view(targets.shape[0], -1)
    return (token_nll * w).sum()


def _chain_sums(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of weighted next-token NLL, sum of weights) from full logits [rows, length, vocab]."""
    ids, weights = batch["input_ids"], batch["loss_weights"]
    w = weights[:, 1:]
    return _chain_nll(logits[:, :-1], ids[:, 1:], w), w.sum()


def _label_loss(last: torch.Tensor, label_ids: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Soft-target cross-entropy over the option labels' logits of readout positions `last` [r, vocab]."""
    valid = label_ids >= 0
    picked = last.gather(1, label_ids.clamp(min=0)).float().masked_fill(~valid, float("-inf"))
    logp = torch.log_softmax(picked, dim=-1).masked_fill(~valid, 0.0)
    return -(target * logp).sum(-1)


def _readout_rows(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """Soft-target cross-entropy of each readout row (None when the batch has no readout example)."""
    rows = torch.nonzero(batch["readout_pos"] >= 0).flatten()
    if len(rows) == 0:
        return None
    pos = batch["readout_pos"][rows]
    return _label_loss(logits[rows, pos], batch["readout_label_ids"][rows], batch["readout_target"][rows])


def logit_sums(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> JointSums:
    """The sums from full logits [rows, length, vocab]: the reference form (small vocabularies, tests)."""
    return JointSums(*_chain_sums(logits, batch), _readout_rows(logits, batch))


def _chunk(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, w: torch.Tensor,
           scored: int, rows: torch.Tensor, offsets: torch.Tensor, label_ids: torch.Tensor,
           target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk's (chain NLL sum, readout losses of the rows whose position falls in it)."""
    logits = head(hidden)
    nll = _chain_nll(logits[:, :scored], targets, w) if scored else logits.new_zeros((), dtype=torch.float32)
    return nll, _label_loss(logits[rows, offsets], label_ids, target)


def chunked_sums(hidden: torch.Tensor, head: torch.nn.Module, batch: dict[str, torch.Tensor],
                 chunk: int) -> JointSums:
    """The sums from the last hidden state [rows, length, hidden] and the LM head, `chunk` positions of
    every row at a time (0 or at least the length: one chunk, the full-logits computation itself)."""
    ids, weights = batch["input_ids"], batch["loss_weights"]
    length = ids.shape[1]
    chunk = length if chunk <= 0 else min(chunk, length)
    all_rows = torch.nonzero(batch["readout_pos"] >= 0).flatten()
    all_pos = batch["readout_pos"][all_rows]
    nll_parts, readout_parts, order = [], [], []
    pieces = hidden.split(chunk, dim=1)   # one backward node gathers the pieces' gradients
    for k, start in enumerate(range(0, length, chunk)):
        end = min(start + chunk, length)
        scored = max(0, min(end, length - 1) - start)   # the row's last position predicts nothing
        inside = (all_pos >= start) & (all_pos < end)
        rows, offsets = all_rows[inside], all_pos[inside] - start
        args = (pieces[k], ids[:, start + 1:start + 1 + scored], weights[:, start + 1:start + 1 + scored],
                scored, rows, offsets, batch["readout_label_ids"][rows], batch["readout_target"][rows])
        if chunk == length:
            nll, readout = _chunk(head, *args)
        else:   # backward recomputes this chunk's logits instead of keeping them
            nll, readout = checkpoint(_chunk, head, *args, use_reentrant=False)
        nll_parts.append(nll)
        readout_parts.append(readout)
        order.append(torch.nonzero(inside).flatten())
    nll_sum = nll_parts[0] if len(nll_parts) == 1 else torch.stack(nll_parts).sum()
    readout = None
    if len(all_rows):
        readout = torch.cat(readout_parts)
        if len(readout_parts) > 1:    # back to row order (the chunks gathered them by position)
            readout = readout[torch.argsort(torch.cat(order))]
    return JointSums(nll_sum, weights[:, 1:].sum(), readout)


def output_head(model: torch.nn.Module) -> torch.nn.Module:
    """The LM head of a (DDP- and PEFT-wrapped) causal LM: the module that turns hidden states into logits,
    with whatever adapter PEFT put on it (the tied embedding delta of `sft.train_embeddings`)."""
    while hasattr(model, "module") and not hasattr(model, "get_output_embeddings"):
        model = model.module
    head = model.get_output_embeddings()
    if head is None:
        raise TypeError(f"{type(model).__name__} has no output embeddings; the joint loss needs a causal LM")
    return head


def model_sums(model: torch.nn.Module, batch: dict[str, torch.Tensor], chunk: int) -> tuple[JointSums, object]:
    """Forward the batch through `model` (DDP's forward included) without building logits, then the sums.

    The forward asks for no logits (`logits_to_keep` = an empty index) and for the hidden states, whose last
    entry is the final norm's output, the LM head's input (transformers' `capture_outputs`)."""
    ids = batch["input_ids"]
    outputs = model(input_ids=ids, attention_mask=batch["attention_mask"], use_cache=False,
                    logits_to_keep=torch.empty(0, dtype=torch.long, device=ids.device), output_hidden_states=True)
    return chunked_sums(outputs.hidden_states[-1], output_head(model), batch, chunk), outputs


def joint_losses(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(weighted next-token loss, soft-target readout loss) from full logits; either is 0 when the batch has none."""
    return mean_losses(logit_sums(logits, batch))


def mean_losses(sums: JointSums) -> tuple[torch.Tensor, torch.Tensor]:
    """(chain loss, readout loss) of one process's batch: the sums over their counts."""
    chain = sums.nll_sum / sums.weight_sum.clamp(min=1e-8)
    zero = sums.nll_sum.new_zeros((), dtype=torch.float32)
    return chain, (zero if sums.readout is None else sums.readout.mean())


def global_joint_losses(sums: JointSums, world: int) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    """This process's share of the global-batch losses, and the global losses for the log.

    Why: DDP averages gradients over processes, so a per-process mean weights a short
    half-batch like a long one and the run drifts from the single-process one. Each
    share is `world x (this process's sum) / (global count)`: averaged by DDP, the
    gradient is exactly that of `mean_losses` on the whole batch. One all-reduce of
    four numbers gives the counts and the logged values.
    """
    import torch.distributed as dist

    nll_sum, weight_sum, rows = sums
    zero = nll_sum.new_zeros((), dtype=torch.float32)
    readout_sum = zero if rows is None else rows.sum()
    n_rows = 0.0 if rows is None else float(len(rows))
    totals = torch.stack([nll_sum.detach(), weight_sum.detach().float(), readout_sum.detach(),
                          nll_sum.new_tensor(n_rows, dtype=torch.float32)])
    dist.all_reduce(totals)
    chain_total, weight_total, readout_total, rows_total = totals.tolist()
    chain = nll_sum * world / max(weight_total, 1e-8)
    readout = readout_sum * world / rows_total if rows_total else zero
    return chain, readout, chain_total / max(weight_total, 1e-8), readout_total / rows_total if rows_total else 0.0

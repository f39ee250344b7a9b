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
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase, get_cosine_schedule_with_warmup

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import atomic_file
from decision_pipeline.common.hashing import make_rng
from decision_pipeline.common.log import info
from decision_pipeline.common.progress import LiveMetrics, TrainingProgress
from decision_pipeline.lm.launch import is_main, rank, world_size
from decision_pipeline.lm.model import build_tiny_model, count_params
from decision_pipeline.lm.params import PretrainParams  # re-exported: params live apart from torch

# Fixed by design, not params: AdamW(betas 0.9/0.95) with this decay and clipping.
WEIGHT_DECAY = 0.1
GRAD_CLIP = 1.0




def selected_texts(pool: Mapping[str, str], ids: Sequence[str], selection: str) -> list[str]:
    """The pool texts a selection names; an id the pool lacks means the selection and the pool come
    from different runs, so it is named instead of surfacing as a KeyError."""
    missing = next((i for i in ids if i not in pool), None)
    if missing is not None:
        raise PipelineError(f"{selection}: document id {missing!r} is not in the pool; the selection and the pool "
                            "are from different runs: rerun curate (dvc repro pipelines/curation/dvc.yaml)")
    return [pool[i] for i in ids]


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
    raise PipelineError(f"params.yaml: curate.budget_tokens: the selection's documents hold {pos} tokens, fewer "
                        f"than the budget {budget}; lower the budget or let curate select more (curate.overfill)")


class StepCheckpoint:
    """The whole state of one training run (model, optimizer, schedule, loss log, step) in one file.

    Why: a killed `pretrain` must resume and end bitwise where an uninterrupted run ends. The
    batch order is precomputed from the seed and nothing else draws random numbers after
    initialisation, so model + optimizer + schedule + step is the entire state. Written to a
    temporary sibling and renamed: a kill mid-save leaves the previous checkpoint intact.
    """

    def __init__(self, path: Path | None, every: int):
        self.path, self.every = path, every

    def load(self, model: PreTrainedModel, opt: torch.optim.Optimizer, sched: Any) -> tuple[int, list[dict]]:
        if self.path is None or not self.path.is_file():
            return 0, []
        state = torch.load(self.path, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        return int(state["step"]), list(state["log"])

    def save(self, step: int, model: PreTrainedModel, opt: torch.optim.Optimizer, sched: Any, log: list[dict],
             final: bool = False) -> None:
        if self.path is None or not is_main() or not (final or (self.every and step % self.every == 0)):
            return
        with atomic_file(self.path) as tmp:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                        "step": step, "log": log}, tmp)


def train_autocast(device: torch.device, bf16: bool) -> torch.autocast:
    """bf16 autocast on the device the batches run on when `pretrain.bf16` (was CPU only: a GPU
    pretrained in fp32, ~2-3x slower); off, it changes nothing (the default profile's numbers)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)


def train_on_tokens(model: PreTrainedModel, tokens: np.ndarray, s: PretrainParams, seed: int,
                    desc: str = "pretrain", on_step: Callable[[int, float], None] | None = None,
                    checkpoint: StepCheckpoint | None = None,
                    progress: TrainingProgress | None = None) -> list[dict]:
    """Train on consecutive windows of `tokens` (order fixed by `seed`); return the loss log.

    With `checkpoint`, a run saved earlier continues from its last step (same final weights).
    `progress` (default: the terminal only) gets the checkpoint's steps replayed, then every step's
    loss and learning rate with the tokens trained so far.
    Under several processes (`pretrain.launch`) rank r takes windows r, r+W, ... of every
    batch and DDP averages the gradients: every window has `seq_len` tokens, so the average
    of the ranks' mean losses is the one-process loss and the step is the same up to float
    summation order. The logged loss is that global mean."""
    torch.manual_seed(seed)
    n_windows = (len(tokens) - 1) // s.seq_len
    windows = torch.from_numpy(tokens[: n_windows * s.seq_len + 1].astype(np.int64))
    rng = np.random.default_rng(seed)
    schedule = [rng.permutation(n_windows) for _ in range(s.epochs)]
    order = np.concatenate(schedule)
    steps = max(1, len(order) // s.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, betas=(0.9, 0.95), weight_decay=WEIGHT_DECAY)
    sched = get_cosine_schedule_with_warmup(opt, min(s.warmup_steps, steps // 2), steps)
    checkpoint = checkpoint or StepCheckpoint(None, 0)
    start, log = checkpoint.load(model, opt, sched)
    if start:
        info("pretrain", f"{desc}: resuming from the checkpoint at step {start} of {steps}")
    progress = progress or TrainingProgress("pretrain", desc, enabled=is_main())
    progress.replay((r["step"], live_values(r)) for r in log)
    progress.begin(start, steps, tokens=start * s.batch_size * s.seq_len)
    model.train()
    forward, device = data_parallel(model)
    started = time.perf_counter() - (log[-1]["seconds"] if log else 0.0)  # a resumed run continues the clock
    for step in range(start, steps):
        idx = order[step * s.batch_size:(step + 1) * s.batch_size][rank()::world_size()]
        batch = torch.stack([windows[i * s.seq_len:(i + 1) * s.seq_len + 1] for i in idx]).to(device)
        with train_autocast(device, s.bf16):
            loss = forward(input_ids=batch[:, :-1], labels=batch[:, :-1].clone(), use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        log.append({"step": step + 1, "loss": round(global_mean(loss.detach()), 5), "lr": sched.get_last_lr()[0],
                    "tokens": (step + 1) * s.batch_size * s.seq_len,
                    "seconds": round(time.perf_counter() - started, 3)})
        checkpoint.save(step + 1, model, opt, sched, log, final=step + 1 == steps)
        progress.step(step + 1, live_values(log[-1]), tokens=log[-1]["tokens"])
        if on_step:
            on_step(step + 1, float(loss.detach()))
    progress.close()
    model.eval()
    return log


def live_values(row: Mapping) -> dict:
    """What a loss-log row puts into the live metrics: loss and learning rate (never `seconds`, a
    machine's timing, which would make the git-tracked DVCLive files differ between reruns)."""
    return {"loss": row["loss"], "lr": row["lr"]}


def data_parallel(model: PreTrainedModel) -> tuple[Callable[..., Any], torch.device]:
    """The callable that runs a training forward pass, and the device batches go to.

    One process: the model itself, on the GPU when there is one. Several (`accelerate
    launch`): the process group is started and the model wrapped in DDP, which all-reduces
    (averages) the gradients in `backward`; gloo on CPU, NCCL on GPUs.
    """
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    model.to(device)
    if world_size() == 1:
        return model, device
    from accelerate import PartialState

    PartialState(cpu=not cuda)  # initialises the process group from the launcher's environment
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    return ddp, device


def global_mean(value: torch.Tensor) -> float:
    """The mean of a per-process scalar over every process (the value itself with one)."""
    if world_size() == 1:
        return float(value)
    import torch.distributed as dist

    total = value.detach().float().clone()
    dist.all_reduce(total)
    return float(total) / world_size()


@torch.no_grad()
def heldout_nll(model: PreTrainedModel, docs_ids: Sequence[Sequence[int]], seq_len: int,
                batch_size: int = 16) -> tuple[float, int]:
    """Summed NLL (nats) and predicted-token count over every document, in order.

    Each document is cut into consecutive windows of `seq_len`; every token but
    a window's first is predicted once. Deterministic: no sampling of batches.
    """
    device = next(model.parameters()).device
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
        logits = model(input_ids=ids.to(device), use_cache=False).logits.float().cpu()
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


DevSet = Mapping[str, tuple[list[list[int]], int]]   # register -> (token ids per document, total UTF-8 bytes)


def encode_dev(tok: PreTrainedTokenizerBase, rows: Sequence[Mapping]) -> dict[str, tuple[list[list[int]], int]]:
    """Dev documents grouped by register: token ids per document and the register's byte count."""
    dev: dict[str, tuple[list[list[int]], int]] = {}
    for r in rows:
        ids, n_bytes = dev.get(r["register"], ([], 0))
        dev[r["register"]] = (ids + [tok(r["text"], add_special_tokens=False)["input_ids"]],
                              n_bytes + len(r["text"].encode("utf-8")))
    return dev


def train_and_eval(docs_ids: Sequence[Sequence[int]], dev: DevSet, tok: PreTrainedTokenizerBase,
                   p: PretrainParams, budget: int, seed: int, desc: str,
                   checkpoint: StepCheckpoint | None = None,
                   init_seed: int | None = None,
                   progress: TrainingProgress | None = None,
                   tune: DevSet | None = None) -> tuple[PreTrainedModel, list[dict], dict]:
    """One run: pack to `budget`, train, evaluate every dev register; (model, loss log, held-out report).
    `seed` orders the windows; `init_seed` (default: `seed`) initialises the model; `progress` reports it;
    `tune` (the knob-tuning set) is evaluated too, into the report's `tune` block."""
    tokens = pack_tokens(docs_ids, tok.eos_token_id, budget)
    model = build_tiny_model(p.model, len(tok), tok.pad_token_id, tok.eos_token_id,
                             seed if init_seed is None else init_seed)
    log = train_on_tokens(model, tokens, p, seed, desc=desc, checkpoint=checkpoint, progress=progress)
    report = evaluate_set(model, dev, p.seq_len)
    if tune:
        report["tune"] = evaluate_set(model, tune, p.seq_len)
    return model, log, report


def evaluate_set(model: PreTrainedModel, dev: DevSet, seq_len: int) -> dict:
    """Perplexity and bits per byte per register and pooled, and the equal-register perplexity."""
    report, total_nll, total_tok, total_bytes = {"registers": {}}, 0.0, 0, 0
    for register, (ids, n_bytes) in sorted(dev.items()):
        nll, n = heldout_nll(model, ids, seq_len)
        report["registers"][register] = perplexity_report(nll, n, n_bytes)
        total_nll, total_tok, total_bytes = total_nll + nll, total_tok + n, total_bytes + n_bytes
    report.update(perplexity_report(total_nll, total_tok, total_bytes))
    report["ppl_equal_registers"] = equal_weight_ppl(report["registers"])
    return report


def equal_weight_ppl(registers: Mapping[str, Mapping]) -> float:
    """exp(mean per-register loss): every register weighs the same (the curation research's headline),
    where the pooled ppl is token-weighted and dominated by the registers with the most held-out tokens."""
    losses = [float(r["loss"]) for r in registers.values()]
    return round(math.exp(sum(losses) / len(losses)), 4) if losses else float("nan")


def seed_order(n_docs: int, n_budget_docs: int | None, seed: int, k: int) -> list[int]:
    """Seed k's document order: a seeded shuffle of the budget part only, the reserve tail after it
    in selection order, so every seed trains on the SAME documents (None: shuffle all, as before)."""
    nb = n_docs if n_budget_docs is None else min(int(n_budget_docs), n_docs)
    return [*make_rng(seed, "reorder", k).permutation(nb).tolist(), *range(nb, n_docs)]


def seed_plan(p: PretrainParams, seed: int, k: int) -> dict[str, int]:
    """Seed k's seeds: `init` initialises the model, `order` shuffles the documents (`seed_order`) and
    the windows. Seed 0 is treated like every other seed (a shuffle, never the selection's own order,
    which differs between arms: register round-robin for curated, random for the baselines), and
    `noise` says which of the two moves between seeds."""
    return {"init": seed + p.init_offset + (k if p.noise != "order" else 0),
            "order": seed + p.order_offset + (k if p.noise != "init" else 0)}


def pretrain(name: str, texts: Sequence[str], heldout_rows: Sequence[Mapping], tok: PreTrainedTokenizerBase,
             p: PretrainParams, budget: int, seed: int,
             work_dir: str | Path | None = None,
             n_budget_docs: int | None = None,
             live_dir: str | Path | None = None,
             tune_rows: Sequence[Mapping] = ()) -> tuple[PreTrainedModel, list[dict], dict]:
    """Train on selection `name` over `p.seeds` seeds; (seed-0 model, its loss log, metrics).

    Seed k packs the documents in the seeded order `seed_plan(p, seed, k)["order"]` and initialises
    with its `init` seed, in every arm alike, so the arms compare as mean and range over paired seeds,
    not as one lucky run. `heldout` in the metrics is the seed-0 model (the one saved and used
    downstream); `seeds.plan` records every seed's init and order seeds.
    With `work_dir` each seed checkpoints there (`seed-<k>.pt`) and a rerun resumes.
    With `live_dir` every seed's per-step loss and learning rate go to DVCLive files there
    (`train/seed-<k>/loss`, ...; the summary `dvc exp show` reads holds each seed's latest loss), a
    resumed seed's earlier steps replayed from its checkpoint.
    `tune_rows` (ingest's tune set) are evaluated beside the held-out set: `tune_seeds` is what curation
    knobs are chosen on, so the held-out numbers stay unread until the headline (the research's dev/hidden split).
    """
    docs_ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    heldout = encode_dev(tok, heldout_rows)
    tune = encode_dev(tok, tune_rows) if tune_rows else None
    live = LiveMetrics(live_dir, summary=("train/seed-*/loss",)) if live_dir is not None and is_main() else None

    def ckpt(k: int) -> StepCheckpoint | None:
        return None if work_dir is None else StepCheckpoint(Path(work_dir) / f"seed-{k}.pt", p.save_steps)

    def run(k: int) -> tuple[PreTrainedModel, list[dict], dict]:
        plan = seed_plan(p, seed, k)
        order = seed_order(len(docs_ids), n_budget_docs, plan["order"], 0)
        if k:
            info("pretrain", f"{name}: seed {k + 1}/{p.seeds} (varies {p.noise})")
        return train_and_eval([docs_ids[i] for i in order], heldout, tok, p, budget, plan["order"],
                              f"pretrain {name}" + (f" seed {k + 1}" if k else ""), ckpt(k), init_seed=plan["init"],
                              progress=TrainingProgress("pretrain", f"{name} seed {k + 1}/{p.seeds}", live=live,
                                                        live_prefix=f"train/seed-{k}", enabled=is_main()),
                              tune=tune)

    model, log, report = run(0)
    metrics = {"heldout": report, "params": count_params(model), "train": {
        "tokens": budget, "steps": len(log), "final_loss": log[-1]["loss"],
        "tokens_per_second": round(log[-1]["tokens"] / max(log[-1]["seconds"], 1e-9), 1)}}
    reports = [report] + [run(k)[2] for k in range(1, p.seeds)]
    metrics["seeds"] = {**seed_spread(reports), "noise": p.noise, "order_policy": "seeded shuffle, every seed",
                        "plan": [seed_plan(p, seed, k) for k in range(p.seeds)]}
    if tune:
        metrics["tune_seeds"] = seed_spread([r.pop("tune") for r in reports])
    return model, log, metrics


def seed_spread(reports: Sequence[Mapping]) -> dict:
    """Held-out perplexity and bits per byte over seeds: each run, mean, min, max and half-range."""
    ppls = [r["ppl"] for r in reports]
    bpbs = [r["bpb"] for r in reports]
    eq = [r["ppl_equal_registers"] for r in reports if "ppl_equal_registers" in r]
    extra = {"ppl_equal_registers": eq, "ppl_equal_registers_mean": round(float(np.mean(eq)), 4)} if eq else {}
    return {**extra, "n": len(reports), "ppl": ppls, "ppl_mean": round(float(np.mean(ppls)), 4),
            "ppl_min": min(ppls), "ppl_max": max(ppls), "ppl_halfrange": round((max(ppls) - min(ppls)) / 2, 4),
            "bpb": bpbs, "bpb_mean": round(float(np.mean(bpbs)), 6)}

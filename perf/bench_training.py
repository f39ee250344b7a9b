"""SFT step cost: fp32 vs CPU bf16 autocast, full-vocabulary vs seen-token embedding delta, with a gate.

Trains the same short joint SFT (the params file's `sft` recipe, `--steps` steps, the
embedding delta on) in each setup, from the same base and seed, and times every
optimizer step. Setups are interleaved (the order rotates each repeat) and each
figure is the median over repeats of the median step time; every ratio is against
fp32 / full vocabulary measured in the same repeat. The machine is shared, so the
`fp32 all, seed+1` row (the baseline's cost at another seed) shows how far a ratio
moves by noise alone, and how far a seed change moves the results; `fp32 none` (no
embedding delta) shows what the delta costs at all.

Results: the final loss is the joint loss (chain + readout_weight x readout) of the
trained adapter on a fixed sample of 256 training examples, in fp32 without autocast
(so every setup is scored on the same batches, whatever its data order), and the dev
readout NLL on the stage's dev questions.

Gate: the fastest setup whose final loss is within 1% (relative) and whose dev readout
NLL is within 0.01 nats of fp32 / full vocabulary passes; if none does, fp32 / full
vocabulary stays. Why these bounds: the dev NLL decides the learning rate (the
committed sweep's two rates differ by 0.003 nats), so a speed-up may move it by
thousandths, not hundredths; 1% of the training loss is the same order.

Usage: python perf/bench_training.py [--model models/base] [--steps 100] [--repeats 3]
Real data and base when `models/base` and the data files exist, else a tiny locally built model.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from decision_pipeline.common.params import load_section
from decision_pipeline.decision.sft.config import SFTParams
from decision_pipeline.decision.sft.trainer import dev_readout_metrics, train_joint
from decision_pipeline.lm.bpe import load_tokenizer
from decision_pipeline.lm.model import load_model

# (precision, embedding delta rows, seed shift); the last two rows are references, not candidates
SETUPS = [("fp32", "all", 0), ("fp32", "seen", 0), ("bf16", "all", 0), ("bf16", "seen", 0), ("fp32", "all", 1),
          ("fp32", "none", 0)]
CANDIDATES = SETUPS[:4]
LOSS_TOLERANCE, NLL_TOLERANCE = 0.01, 0.01  # relative final loss, absolute dev NLL (nats)


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step (data, forward, backward, optimizer)."""

    def __init__(self):
        self.times: list[float] = []
        self.last = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self.last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self.last)


def tiny_inputs(root: Path) -> tuple[str, list[dict], list[dict]]:
    """A locally built tokenizer + 2-layer model, questions and teacher chains (no data needed)."""
    from decision_pipeline.questions.families import reasoning_text
    from decision_pipeline.questions.splits import build_questions
    from decision_pipeline.lm.bpe import question_chats, train_bpe, wrap_fast
    from decision_pipeline.lm.model import TinyModelSpec, build_tiny_model

    questions = build_questions(["keyword", "category", "larger", "count"], [0, 1, 2, 3, 4], 12, 0)
    rng = random.Random(0)
    corpus = question_chats(questions) + [reasoning_text(rng) for _ in range(400)]
    corpus += [" ".join(f"Answer: {c}" for c in "ABCDEFGH")] * 10
    tok = wrap_fast(train_bpe(corpus, 2000, [f" {c}" for c in "ABCDEFGH"], min_frequency=2), 512)
    spec = TinyModelSpec(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512, max_positions=512)
    build_tiny_model(spec, len(tok), tok.pad_token_id, tok.eos_token_id, seed=0).save_pretrained(str(root))
    tok.save_pretrained(str(root))
    return str(root), questions[: len(questions) * 3 // 4], questions[len(questions) * 3 // 4:]


def load_examples(args, p: SFTParams, model_dir: str, tiny: tuple | None) -> tuple[list[dict], list[dict]]:
    """The stage's joint examples and dev questions, from the pipeline's data or the tiny stand-in."""
    from decision_pipeline.decision.sft.data import build_joint_examples
    from decision_pipeline.decision.sft.run import load_training_data

    tok = load_tokenizer(model_dir)
    if tiny is None:
        examples, _, dev = load_training_data(p, tok, args.items, args.kept, args.chains)
        return examples, dev
    _, pool, dev = tiny
    kept = [{"id": f"t{i}", "question_id": q["id"], "text": f"<think>\n{q['trace']}\n</think>\nAnswer: A"}
            for i, q in enumerate(pool)]
    examples, _ = build_joint_examples(tok, pool, kept, {}, p.alpha, p.prompt_loss_weight, p.max_length)
    return examples, dev[: p.dev_items]


def run_setup(model_dir: str, examples: list[dict], dev: list[dict], p: SFTParams, setup: tuple,
              lr: float, seed: int, steps: int, with_dev: bool) -> dict:
    """One short SFT in `setup`; median step time (first 3 steps dropped), final loss, dev NLL."""
    precision, rows, seed_shift = setup
    s = dataclasses.replace(p, bf16=precision == "bf16", embedding_tokens="all" if rows == "none" else rows,
                            train_embeddings=rows != "none", max_steps=steps, save_steps=0)
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    timer = StepTimer()
    with tempfile.TemporaryDirectory(prefix="bench_training.") as work, contextlib.redirect_stdout(io.StringIO()):
        peft_model, _, parts = train_joint(model, tok, examples, s, lr, seed + seed_shift, work, callbacks=[timer])
    out = {"step_s": statistics.median(timer.times[3:] or timer.times)}
    if with_dev:
        out["final_loss"] = scored_loss(peft_model, examples, p.readout_weight, tok.pad_token_id)
        out["dev_nll"] = dev_readout_metrics(peft_model, tok, dev)["nll"]
    return out


def scored_loss(model, examples: list[dict], readout_weight: float, pad_id: int) -> float:
    """Joint loss of the trained model on a fixed seeded sample of 256 training examples (fp32, eval)."""
    from decision_pipeline.decision.sft.data import JointCollator
    from decision_pipeline.decision.sft.loss import joint_losses

    sample = random.Random(0).sample(examples, min(256, len(examples)))
    collate, total = JointCollator(pad_id), []
    with torch.no_grad():
        for k in range(0, len(sample), 16):
            batch = collate(sample[k:k + 16])
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            chain, readout = joint_losses(logits, batch)
            total.append(float(chain) + readout_weight * float(readout))
    return statistics.fmean(total)


def forward_check(model_dir: str, examples: list[dict], pad_id: int) -> float:
    """Relative difference of one batch's joint loss under bf16 autocast vs fp32, same weights."""
    from decision_pipeline.decision.sft.data import JointCollator
    from decision_pipeline.decision.sft.loss import joint_losses

    model = load_model(model_dir)
    batch = JointCollator(pad_id)(examples[:16])
    losses = []
    for bf16 in (False, True):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        losses.append(sum(float(x) for x in joint_losses(logits, batch)))
    return abs(losses[1] - losses[0]) / losses[0]


def gate(results: dict) -> tuple[str, dict]:
    """The fastest setup within the tolerances of fp32/all (seed-shifted reference rows excluded)."""
    base = results[SETUPS[0]]
    verdicts = {}
    for setup in CANDIDATES:
        r = results[setup]
        loss_dev = abs(r["final_loss"] - base["final_loss"]) / base["final_loss"]
        nll_dev = abs(r["dev_nll"] - base["dev_nll"])
        verdicts[setup] = loss_dev <= LOSS_TOLERANCE and nll_dev <= NLL_TOLERANCE
    passing = [s for s in CANDIDATES if verdicts[s]]
    best = min(passing, key=lambda s: results[s]["step_s"])
    return f"{best[0]} / {best[1]}", verdicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/base")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--items", default="data/items/items.parquet")
    ap.add_argument("--kept", default="data/select_chains/kept.jsonl")
    ap.add_argument("--chains", default="data/generate/chains.jsonl")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default="", help="also write the figures here")
    args = ap.parse_args()
    p = load_section(SFTParams, "sft", args.params)
    torch.set_num_threads(p.threads)
    real = all(Path(x).exists() for x in (args.model, args.items, args.kept, args.chains))
    tmp = tempfile.TemporaryDirectory(prefix="bench_training_model.")
    tiny = None if real else tiny_inputs(Path(tmp.name))
    model_dir = args.model if real else tiny[0]
    examples, dev = load_examples(args, p, model_dir, tiny)
    lr, seed = p.lr, 0
    print(f"{'real base ' + args.model if real else 'tiny local model'}: {len(examples)} examples, "
          f"{len(dev)} dev questions, {args.steps} steps x {args.repeats} interleaved repeats, lr {lr:g}, "
          f"{p.threads} threads; bf16 vs fp32 on one batch, same weights: "
          f"{forward_check(model_dir, examples, load_tokenizer(model_dir).pad_token_id):.2e} relative")
    times: dict[tuple, list[float]] = {s: [] for s in SETUPS}
    ratios: dict[tuple, list[float]] = {s: [] for s in SETUPS}
    results: dict[tuple, dict] = {}
    for rep in range(args.repeats):
        order = SETUPS[rep % len(SETUPS):] + SETUPS[: rep % len(SETUPS)]
        this = {}
        for s in order:
            this[s] = run_setup(model_dir, examples, dev, p, s, lr, seed, args.steps, with_dev=rep == 0)
            print(f"  repeat {rep + 1}: {s} {this[s]['step_s'] * 1000:.1f} ms/step", file=sys.stderr, flush=True)
        for s in SETUPS:
            times[s].append(this[s]["step_s"])
            ratios[s].append(this[SETUPS[0]]["step_s"] / this[s]["step_s"])
            if rep == 0:
                results[s] = dict(this[s])
    for s in SETUPS:
        results[s]["step_s"] = statistics.median(times[s])
        results[s]["speedup"] = statistics.median(ratios[s])
    chosen, verdicts = gate(results)
    base = results[SETUPS[0]]
    print(f"{'setup':<22}{'ms/step':>9}{'speed-up':>10}{'final loss':>12}{'Δ rel':>8}{'dev NLL':>9}{'Δ':>8}  gate")
    for s in SETUPS:
        r = results[s]
        name = f"{s[0]} {s[1]}" + (f", seed+{s[2]}" if s[2] else "")
        verdict = ("pass" if verdicts[s] else "fail") if s in verdicts else "(reference)"
        print(f"{name:<22}{r['step_s'] * 1000:>9.1f}{r['speedup']:>9.2f}x{r['final_loss']:>12.4f}"
              f"{(r['final_loss'] - base['final_loss']) / base['final_loss']:>+8.2%}{r['dev_nll']:>9.4f}"
              f"{r['dev_nll'] - base['dev_nll']:>+8.4f}  {verdict}")
    print(f"gate (final loss within {LOSS_TOLERANCE:.0%}, dev NLL within {NLL_TOLERANCE} nats of fp32 all): "
          f"fastest passing setup = {chosen}")
    if args.json:
        Path(args.json).write_text(json.dumps({"chosen": chosen, "results": {" ".join(map(str, s)): r
                                                                             for s, r in results.items()}}, indent=2))
    tmp.cleanup()


if __name__ == "__main__":
    main()

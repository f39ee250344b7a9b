"""Prototype: can the tiny model follow chains that compute? (scratch)

python proto.py --steps 1500 --per-level 300 --families chain,compare,count,largest
"""
import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from decision_pipeline.decision.parsing import parse_with_reason  # noqa: E402
from decision_pipeline.decision.prompts import label_ids, readout_prefix, thinking_prefix  # noqa: E402
from decision_pipeline.decision.sft.data import JointCollator, readout_example, reasoner_example  # noqa: E402
from decision_pipeline.decision.sft.loss import joint_losses  # noqa: E402
from decision_pipeline.questions.schema import LABELS, assistant_answer, gold_index  # noqa: E402

import importlib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=1500)
ap.add_argument("--per-level", type=int, default=300)
ap.add_argument("--eval-per-level", type=int, default=60)
ap.add_argument("--families", default="chain,compare,count,largest")
ap.add_argument("--levels", default="0,1,2,3,4")
ap.add_argument("--lr", type=float, default=3e-3)
ap.add_argument("--bs", type=int, default=16)
ap.add_argument("--readout-weight", type=float, default=4.0)
ap.add_argument("--model", default="base")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--test-seed", type=int, default=None, help="seed of the test questions (default 10,000 + --seed)")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--max-new", type=int, default=96)
ap.add_argument("--out", default="")
ap.add_argument("--fams", default="fams")
ap.add_argument("--save", default="")
ap.add_argument("--eval-only", action="store_true")
a = ap.parse_args()
fams = importlib.import_module(a.fams)
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)
rng = random.Random(a.seed)
tok = AutoTokenizer.from_pretrained(a.model)
model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
families = a.families.split(",")
levels = [int(x) for x in a.levels.split(",")]


def make(n, r):
    out = []
    for f in families:
        for lv in levels:
            for _ in range(n):
                q = fams.FAMILIES[f](r, lv)
                q["id"] = f"{f}-{lv}-{len(out)}"
                out.append(q)
    return out


train = make(a.per_level, rng)
test = make(a.eval_per_level, random.Random(10_000 + a.seed if a.test_seed is None else a.test_seed))
key = lambda q: q["question"] + "|" + "|".join(o["text"] for o in q["options"])  # noqa: E731
seen = {key(q) for q in train}
test = [q for q in test if key(q) not in seen]


def chain_text(q):
    return assistant_answer(q, LABELS[gold_index(q)], q["trace"])


examples = []
for q in train:
    ex = reasoner_example(tok, q, chain_text(q), 1.0, 512)
    if ex:
        examples.append(ex)
    examples.append(readout_example(tok, q, [float(i == gold_index(q)) for i in range(len(q["options"]))], 1.0))
print(f"train examples {len(examples)}, test {len(test)}", flush=True)
coll = JointCollator(tok.pad_token_id)
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
warm = 30


def lr_at(s):
    if s < warm:
        return a.lr * (s + 1) / warm
    return a.lr * 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, a.steps - warm)))


t0 = time.time()
if a.eval_only:
    a.steps = 0
model.train()
order = []
for step in range(a.steps):
    if not order:
        order = list(range(len(examples)))
        rng.shuffle(order)
    batch_idx = [order.pop() for _ in range(min(a.bs, len(order)))]
    batch = coll([examples[i] for i in batch_idx])
    for g in opt.param_groups:
        g["lr"] = lr_at(step)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    chain_l, ro_l = joint_losses(logits, batch)
    loss = chain_l + a.readout_weight * ro_l
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if step % 100 == 0:
        print(f"step {step} chain {chain_l.item():.3f} readout {ro_l.item():.3f} {time.time() - t0:.0f}s", flush=True)
print(f"train {time.time() - t0:.0f}s", flush=True)
if a.save and not a.eval_only:
    model.save_pretrained(a.save); tok.save_pretrained(a.save)
model.eval()


@torch.no_grad()
def readout(qs):
    res = []
    for q in qs:
        ids = torch.tensor([readout_prefix(tok, q)])
        lg = model(input_ids=ids).logits[0, -1]
        lab = label_ids(tok, len(q["options"]))
        res.append(int(torch.argmax(lg[lab])) == gold_index(q))
    return res


@torch.no_grad()
def thinking(qs, bs=32):
    res = []
    tok.padding_side = "left"
    for i in range(0, len(qs), bs):
        chunk = qs[i:i + bs]
        pref = [thinking_prefix(tok, q) for q in chunk]
        w = max(map(len, pref))
        ids = torch.tensor([[tok.pad_token_id] * (w - len(p)) + p for p in pref])
        mask = torch.tensor([[0] * (w - len(p)) + [1] * len(p) for p in pref])
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=a.max_new, do_sample=False,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
        for q, o in zip(chunk, out):
            text = tok.decode(o[w:], skip_special_tokens=False)
            text = text.split("<|im_end|>")[0]
            parsed = parse_with_reason("<think>\n" + text, len(q["options"]))
            letter = parsed[0] if isinstance(parsed, tuple) else parsed
            exp_lines = q["trace"].split("\n")
            got_lines = text.split("</think>")[0].strip().split("\n")
            steps_ok = 0
            for e, g in zip(exp_lines, got_lines):
                if e.strip() != g.strip():
                    break
                steps_ok += 1
            res.append({"parsed": letter is not None, "right": letter == gold_index(q),
                        "steps": steps_ok / len(exp_lines), "text": text})
    return res


ro = readout(test)
th = thinking(test)
table = {}
for f in families:
    for lv in levels:
        idx = [i for i, q in enumerate(test) if q["family"] == f and q["level"] == lv]
        n = len(idx)
        if not n:
            continue
        r = sum(ro[i] for i in idx) / n
        t = sum(th[i]["right"] for i in idx) / n
        p = sum(th[i]["parsed"] for i in idx) / n
        s = sum(th[i]["steps"] for i in idx) / n
        table[f"{f}{lv}"] = dict(n=n, readout=round(r, 3), thinking=round(t, 3), parse=round(p, 3), steps=round(s, 3))
        print(f"{f:8s} L{lv} n={n:3d} readout {r:.3f} thinking {t:.3f} parse {p:.2f} step-acc {s:.2f}", flush=True)
print("overall readout", sum(ro) / len(ro), "thinking", sum(x["right"] for x in th) / len(th))
for f in families:
    i = next((i for i, q in enumerate(test) if q["family"] == f and q["level"] == max(levels)), None)
    if i is None:
        continue
    print("---", test[i]["question"], "\nEXPECT:", test[i]["trace"].replace("\n", " | "), "\nGOT:", th[i]["text"][:300].replace("\n", " | "))
if a.out:
    json.dump(table, open(a.out, "w"), indent=1)

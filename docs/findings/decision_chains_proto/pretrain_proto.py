"""Prototype pretraining: the committed run's curated selection, its reasoning documents rewritten in a
new family set's trace format, packed into seq_len windows; a fresh Qwen2 of a given shape."""
import argparse, importlib, json, math, random, sys, time
from pathlib import Path

import pyarrow.parquet as pq
import torch
ROOT = Path(__file__).resolve().parents[3]  # the repository root, after `dvc repro`
sys.path.insert(0, str(ROOT))
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--fams", default="fams2")
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--hidden", type=int, default=128)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--epochs", type=float, default=1.0)
ap.add_argument("--seq", type=int, default=128)
ap.add_argument("--bs", type=int, default=16)
ap.add_argument("--lr", type=float, default=3e-3)
ap.add_argument("--reasoning-share", type=float, default=-1, help="override: share of docs that are reasoning")
ap.add_argument("--out", required=True)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--copy-share", type=float, default=0.0,
                help="share of each batch's windows that are synthetic copy windows (copymix.py); the step count "
                     "stays the one --epochs gives on the documents alone, so the documents get (1 - share) of it")
ap.add_argument("--copy-share-end", type=float, default=None, help="linear schedule: the share at the last step")
ap.add_argument("--copy-styles", default="", help="comma-separated copymix styles (default: all)")
ap.add_argument("--seed", type=int, default=0, help="init, window order and copy documents (the documents stay seed 0's)")
ap.add_argument("--pure-steps", type=int, default=0,
                help="copy-only steps BEFORE the run --epochs gives (section 7): only --pure-styles copy windows, "
                     "constant lr after warm-up; the run after it keeps its own curriculum and cosine")
ap.add_argument("--pure-styles", default="repeat,tagword", help="copymix styles of the pure phase")
ap.add_argument("--pure-bs", type=int, default=None, help="batch size of the pure phase (default --bs)")
ap.add_argument("--pure-seq", type=int, default=None, help="window length of the pure phase (default --seq)")
ap.add_argument("--pure-lr", type=float, default=None, help="lr of the pure phase (default --lr)")
ap.add_argument("--pure-until", type=float, default=0.0,
                help="end the pure phase early once the mean copy-line accuracy of its last 50 steps reaches this")
ap.add_argument("--warmup", type=int, default=20, help="linear warm-up steps (counted from the first step of either phase)")
a = ap.parse_args()
torch.set_num_threads(a.threads)
fams = importlib.import_module(a.fams)
tok = AutoTokenizer.from_pretrained("base")
sel = json.load(open(ROOT / "data/curate/curated/selection.json"))
ids = sel["ids"][: sel["n_budget_docs"]]
pool = pq.read_table(ROOT / "data/pool/pool.parquet").to_pylist()
by_id = {r["id"]: r for r in pool}
rng = random.Random(0)


def reasoning_doc(r):
    f = r.choice(sorted(fams.FAMILIES))
    q = fams.FAMILIES[f](r, r.randrange(5))
    opts = "\n".join(f"{'ABCDEFGH'[i]}) {o['text']}" for i, o in enumerate(q["options"]))
    gold = next(i for i, o in enumerate(q["options"]) if o["id"] == q["gold"])
    return f"{q['question']}\n{opts}\n{q['trace']}\nAnswer: {'ABCDEFGH'[gold]}"


texts = []
for i in ids:
    d = by_id[i]
    reg = json.loads(d["meta_json"]).get("meta_register")
    texts.append(reasoning_doc(rng) if reg == "reasoning" else d["text"])
n_reason = sum(1 for i in ids if json.loads(by_id[i]["meta_json"]).get("meta_register") == "reasoning")
print(f"docs {len(texts)} reasoning {n_reason}", flush=True)
stream = []
for t in texts:
    stream += tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
n_win = len(stream) // a.seq
windows = torch.tensor(stream[: n_win * a.seq]).view(n_win, a.seq)
steps = int(a.epochs * n_win / a.bs)
print(f"tokens {len(stream)} windows {n_win} steps {steps}", flush=True)
end = a.copy_share if a.copy_share_end is None else a.copy_share_end
n_copy = [round(a.bs * (a.copy_share + (end - a.copy_share) * s / max(1, steps - 1))) for s in range(steps)]
if sum(n_copy):
    import copymix
    styles = tuple(a.copy_styles.split(",")) if a.copy_styles else copymix.STYLES
    cwin, clab = copymix.copy_windows(tok, sum(n_copy), a.seq, seed=1 + a.seed, styles=styles)
    print(f"copy windows {sum(n_copy)} ({sum(n_copy) / (steps * a.bs):.2f} of all), share {a.copy_share}->{end}, styles {styles}", flush=True)
cpos = 0
cfg = Qwen2Config(vocab_size=len(tok), hidden_size=a.hidden, intermediate_size=4 * a.hidden, num_hidden_layers=a.layers,
                  num_attention_heads=a.heads, num_key_value_heads=a.heads, max_position_embeddings=1024,
                  tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
torch.manual_seed(a.seed)
model = Qwen2ForCausalLM(cfg)
print("params", sum(p.numel() for p in model.parameters()), flush=True)
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
g = torch.Generator().manual_seed(a.seed)
t0 = time.time()
if a.pure_steps:
    import copymix
    pbs, plr, pseq = a.pure_bs or a.bs, a.pure_lr or a.lr, a.pure_seq or a.seq
    pstyles = tuple(a.pure_styles.split(","))
    print(f"pure phase: up to {a.pure_steps} steps, bs {pbs}, seq {pseq}, lr {plr}, styles {pstyles}, until {a.pure_until}", flush=True)
    accs, chunk, CH = [], None, 100
    for s in range(a.pure_steps):
        if s % CH == 0:  # copy windows made 100 steps at a time (an early stop makes no more)
            chunk = copymix.copy_windows(tok, CH * pbs, pseq, seed=10_000 * (1 + a.seed) + s // CH, styles=pstyles)
        batch = chunk[0][(s % CH) * pbs:(s % CH + 1) * pbs]
        labels = chunk[1][(s % CH) * pbs:(s % CH + 1) * pbs]
        for pg in opt.param_groups:
            pg["lr"] = plr * min(1, (s + 1) / a.warmup)
        out = model(input_ids=batch, labels=labels)
        opt.zero_grad(); out.loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
        lg, tg = out.logits[:, :-1].detach(), labels[:, 1:]
        m = tg != -100
        accs.append((lg[m].argmax(-1) == tg[m]).float().mean().item())
        if s % 100 == 0:
            print(f"pure {s}/{a.pure_steps} copy-loss {out.loss.item():.3f} copy-acc {accs[-1]:.3f} "
                  f"mean50 {sum(accs[-50:]) / len(accs[-50:]):.3f} {time.time() - t0:.0f}s", flush=True)
        if a.pure_until and len(accs) >= 50 and sum(accs[-50:]) / 50 >= a.pure_until:
            break
    print(f"pure phase ended at step {len(accs)} (mean50 copy-acc {sum(accs[-50:]) / len(accs[-50:]):.3f}) {time.time() - t0:.0f}s", flush=True)
    wdone = len(accs)
else:
    wdone = 0
order = torch.randperm(n_win, generator=g)
pos = 0
for s in range(steps):
    nb = a.bs - n_copy[s]
    if pos + nb > n_win:
        order, pos = torch.randperm(n_win, generator=g), 0
    batch = labels = windows[order[pos:pos + nb]]
    pos += nb
    if n_copy[s]:
        batch = torch.cat([batch, cwin[cpos:cpos + n_copy[s]]])
        labels = torch.cat([labels, clab[cpos:cpos + n_copy[s]]])
        cpos += n_copy[s]
    lr = a.lr * min(1, (wdone + s + 1) / a.warmup) * (0.5 * (1 + math.cos(math.pi * s / steps)) if wdone + s >= a.warmup else 1)
    for pg in opt.param_groups:
        pg["lr"] = lr
    out = model(input_ids=batch, labels=labels)
    loss = out.loss
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
    if s % 100 == 0:
        extra = ""
        if n_copy[s]:  # the copy windows' own loss and next-token accuracy on their copy lines
            lg, tg = out.logits[nb:, :-1].detach(), labels[nb:, 1:]
            m = tg != -100
            ce = torch.nn.functional.cross_entropy(lg[m], tg[m]).item()
            extra = f" copy-loss {ce:.3f} copy-acc {(lg[m].argmax(-1) == tg[m]).float().mean().item():.3f}"
        print(f"step {s}/{steps} loss {loss.item():.3f}{extra} {time.time() - t0:.0f}s", flush=True)
model.save_pretrained(a.out)
tok.save_pretrained(a.out)
print(f"done {time.time() - t0:.0f}s", flush=True)

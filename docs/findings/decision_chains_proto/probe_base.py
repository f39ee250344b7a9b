"""Teacher-forced accuracy of a pretrained base on the chain line of label-anchored documents, by family."""
import random, sys, torch, importlib
from transformers import AutoTokenizer, AutoModelForCausalLM
torch.set_num_threads(1)
model_dir, famsmod = sys.argv[1], sys.argv[2]
fams = importlib.import_module(famsmod)
tok = AutoTokenizer.from_pretrained(model_dir); m = AutoModelForCausalLM.from_pretrained(model_dir).eval()
rng = random.Random(123)
TAGS = set("abcdefghijk")


def value_positions(family, d):
    """Chain positions that copy a *value* (not a label): the token after each item label (total's digit,
    count's word), the digit after "X) " (largest, copied from the option lines), every node after "at" (hop)."""
    if family in ("total", "count"):
        return [i for i in range(1, len(d)) if d[i - 1].strip() in TAGS]
    if family == "largest":
        return [i for i in range(2, len(d)) if d[i - 2] == ")" and d[i - 1] == " " and d[i].isdigit()]
    if family == "hop":
        end = d.index(".") if "." in d else len(d)
        return [i for i in range(1, end) if len(d[i].strip()) == 1 and d[i].strip().islower()]
    return []


LAYOUT = set(tok(', . = ? So so no yes max > < , A) B) C) D)', add_special_tokens=False)['input_ids'])
for f in sorted(fams.FAMILIES):
    hit = tot = ch = ct = vh = vt = 0
    for _ in range(100):
        q = fams.FAMILIES[f](rng, rng.randrange(1, 5))
        opts = "\n".join(f"{'ABCDEFGH'[i]}) {o['text']}" for i, o in enumerate(q["options"]))
        head = f"{q['question']}\n{opts}\n"
        a = tok(head, add_special_tokens=False)["input_ids"]; b = tok(q["trace"], add_special_tokens=False)["input_ids"]
        ids = torch.tensor([a + b])
        with torch.no_grad():
            pred = m(input_ids=ids).logits[0, len(a) - 1:-1].argmax(-1)
        hit += (pred == ids[0, len(a):]).sum().item(); tot += len(b)
        qset = set(tok(q["question"], add_special_tokens=False)["input_ids"]) - LAYOUT
        for t, p in zip(b, pred.tolist()):
            if t in qset:
                ch += (t == p); ct += 1
        for i in value_positions(f, [tok.decode([t]) for t in b]):
            vh += int(pred[i]) == b[i]; vt += 1
    print(f"{model_dir} {f}: chain-token accuracy {hit / tot:.3f} over {tot} tokens; on tokens found in the question {ch / max(ct, 1):.3f} over {ct}; on copied values {vh / max(vt, 1):.3f} over {vt}", flush=True)

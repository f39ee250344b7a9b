"""Teacher-forced accuracy of a base on copymix's documents, by style: the share of the second line's
tokens (after its first) predicted right. "repeat" is the plain induction score (every token is a copy).

python copyprobe.py MODEL_DIR [N_PER_STYLE]"""
import random
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import copymix

torch.set_num_threads(1)
model_dir = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
tok = AutoTokenizer.from_pretrained(model_dir)
m = AutoModelForCausalLM.from_pretrained(model_dir).eval()
words = copymix.vocab_words(tok)
res = []
for style in copymix.STYLES:
    rng = random.Random(99)
    hit = tot = 0
    for _ in range(n):
        first, second = copymix.copy_doc(rng, words, (style,))
        a = tok(first, add_special_tokens=False)["input_ids"]
        b = tok(second, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([a + b])
        with torch.no_grad():
            pred = m(input_ids=ids).logits[0, len(a):-1].argmax(-1)
        hit += (pred == ids[0, len(a) + 1:]).sum().item()
        tot += len(b) - 1
    res.append(f"{style} {hit / tot:.3f}")
print(model_dir, "copy-line accuracy:", ", ".join(res), f"({n} documents per style)", flush=True)

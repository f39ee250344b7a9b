"""Synthetic label-anchored copy documents for pretraining (issue 51: cross the induction plateau before SFT).

Each document is a list of labelled items in one of the chain families' surface shapes, a newline, and the
same items listed again (in the same order half the time, shuffled otherwise), e.g.

    a4, b1, c3, d3.\nc3, a4, d3, b1.                 (total's "a4")
    a basket, b plum, c ladder.\na basket, b plum, c ladder.   (count's "a basket"; words also random vocabulary)
    A) 7, B) 2, C) 9.\nB) 2, A) 7, C) 9.             (largest's "A) 7": value three tokens after the label)
    G b, A c, C r.\nc r, g b, a c.                   (hop's "G b": the query key is the lower-case label)
    console site, land yeah.\nland yeah, console site.   (random one-token keys, random values)
    tree 4 rome k site.\ntree 4 rome k site.        ("repeat": a random sequence said twice, the densest induction)

Only the second line carries loss (`mask` is 1 there): the first line is random, the second is copying.
"""
import random
import re

from fams3 import FILLER, FRUITS, TAGS
from fams4 import LOW

UPPER = "ABCDEFGH"


def vocab_words(tok):
    """One-token lower-case words with a leading space (the tokenizer's 'Ġword' entries), sorted."""
    return sorted(t[1:] for t in tok.get_vocab() if re.fullmatch("\u0120[a-z]{3,}", t))


def _pairs(rng, style, words, n):
    if style == "tagdigit":
        return [(TAGS[i], str(rng.randrange(10))) for i in range(n)], "{}{}", "{}{}"
    if style == "tagword":
        pool = FRUITS + FILLER if rng.random() < 0.5 else words
        return [(TAGS[i], rng.choice(pool)) for i in range(n)], "{} {}", "{} {}"
    if style == "option":
        vals = [str(rng.randrange(10)) if rng.random() < 0.7 else rng.choice(words) for _ in range(n)]
        return list(zip(UPPER[:n], vals)), "{}) {}", "{}) {}"
    if style == "case":
        keys = rng.sample(LOW, n)
        return [(k.upper(), rng.choice(LOW)) for k in keys], "{} {}", "case"
    keys = rng.sample(words, n)  # "random"
    return [(k, rng.choice(words)) for k in keys], "{} {}", "{} {}"


STYLES = ("tagdigit", "tagword", "option", "case", "random", "repeat")


def copy_doc(rng, words, styles=STYLES):
    style = rng.choice(styles)
    if style == "repeat":
        seq = " ".join(rng.choice(words) if rng.random() < 0.6 else rng.choice(LOW + "0123456789")
                       for _ in range(rng.randint(8, 24)))
        return seq + ".\n", seq + "."
    n = rng.randint(3, 8)
    pairs, fmt, qfmt = _pairs(rng, style, words, n)
    first = ", ".join(fmt.format(k, v) for k, v in pairs) + "."
    order = list(pairs)
    if rng.random() < 0.5:
        rng.shuffle(order)
    if qfmt == "case":
        second = ", ".join(f"{k.lower()} {v}" for k, v in order) + "."
    else:
        second = ", ".join(qfmt.format(k, v) for k, v in order) + "."
    return first + "\n", second


def copy_windows(tok, n_windows, seq, seed=1, styles=STYLES):
    """n_windows packed windows of copy documents: (input ids, labels with -100 off the copy lines)."""
    import torch

    rng = random.Random(seed)
    words = vocab_words(tok)
    ids, lab = [], []
    while len(ids) < n_windows * seq:
        first, second = copy_doc(rng, words, styles)
        a = tok(first, add_special_tokens=False)["input_ids"]
        b = tok(second, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        ids += a + b
        lab += [-100] * len(a) + b
    ids = torch.tensor(ids[: n_windows * seq]).view(n_windows, seq)
    lab = torch.tensor(lab[: n_windows * seq]).view(n_windows, seq)
    return ids, lab


if __name__ == "__main__":
    import sys

    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(sys.argv[1] if len(sys.argv) > 1 else "base")
    r, w = random.Random(0), vocab_words(t)
    print(len(w), "vocabulary words")
    for _ in range(10):
        f, s = copy_doc(r, w)
        print(repr(f + s))

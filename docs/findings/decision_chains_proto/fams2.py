"""Prototype families v2: every chain token is a copy (induction) or a local operation."""
import random

YES_NO = [{"id": "true", "text": "yes", "value": None}, {"id": "false", "text": "no", "value": None}]
VARS = "abcdefgh"
LETTERS = "ABCDEFGH"


def _q(family, level, task, text, options, gold, trace):
    return {"family": family, "level": level, "task": task, "question": text, "options": options,
            "gold": gold, "target": {o["id"]: float(o["id"] == gold) for o in options}, "trace": "\n".join(trace)}


def _walk(rng, n, lo, hi, dmax):
    while True:
        v = rng.randint(lo, hi)
        vals, ops = [v], []
        for _ in range(n):
            choices = [(s, d) for s in "+-" for d in range(1, dmax + 1) if lo <= (v + d if s == "+" else v - d) <= hi]
            s, d = rng.choice(choices)
            v = v + d if s == "+" else v - d
            ops.append((s, d))
            vals.append(v)
        return vals, ops


def chain(rng, level):
    """score (values 0..7): a = 3. b = a + 4. c = b - 2. What is c?  Chain: b = a + 4 = 3 + 4 = 7."""
    vals, ops = _walk(rng, level, 0, 7, 4)
    names = VARS[:level + 1]
    stmts = [f"{names[0]} = {vals[0]}."] + [f"{names[i + 1]} = {names[i]} {s} {d}." for i, (s, d) in enumerate(ops)]
    trace = [f"{names[0]} = {vals[0]}."]
    for i, (s, d) in enumerate(ops):
        trace.append(f"{names[i + 1]} = {names[i]} {s} {d} = {vals[i]} {s} {d} = {vals[i + 1]}.")
    trace.append(f"So {names[-1]} = {vals[-1]}.")
    options = [{"id": f"v{v}", "text": str(v), "value": float(v)} for v in range(8)]
    return _q("chain", level, "score", " ".join(stmts) + f" What is {names[-1]}?", options, f"v{vals[-1]}", trace)


def compare(rng, level):
    """noul: is 6 + 2 - 3 more than 4? Level = number of steps; running sum chain."""
    vals, ops = _walk(rng, level, 1, 9, 5)
    expr = str(vals[0]) + "".join(f" {s} {d}" for s, d in ops)
    v = vals[-1]
    thr = max(0, v + rng.choice([-2, -1, 1, 2]))
    if thr == v:
        thr = v + 1
    yes = v > thr
    trace = [f"{vals[0]}."] + [f"{vals[i]} {s} {d} = {vals[i + 1]}." for i, (s, d) in enumerate(ops)]
    trace.append(f"{v} {'>' if yes else '<'} {thr}, so {'yes' if yes else 'no'}.")
    return _q("compare", level, "noul", f"Is {expr} more than {thr}?", YES_NO, "true" if yes else "false", trace)


FRUITS = ["apple", "pear", "plum", "grape", "lemon", "mango", "peach", "cherry", "melon", "banana"]
FILLER = ["stone", "river", "cloud", "table", "paper", "window", "garden", "bridge", "candle", "ladder",
          "mirror", "basket", "pillow", "rocket", "silver", "forest", "market", "letter", "jacket", "pocket"]


def count(rng, level):
    """score (0..4): how many fruits in a list of 1, 3, 5, 7, 9 words; running count chain."""
    n = (1, 3, 5, 7, 9)[level]
    k = rng.randint(0, min(4, n))
    items = rng.sample(FRUITS, k) + rng.sample(FILLER, n - k)
    rng.shuffle(items)
    options = [{"id": f"v{v}", "text": str(v), "value": float(v)} for v in range(5)]
    trace, seen = [], 0
    for w in items:
        f = w in FRUITS
        seen += f
        trace.append(f"{w} {'yes' if f else 'no'} {seen}")
    trace.append(f"So {seen}.")
    return _q("count", level, "score", f"How many fruits: {', '.join(items)}?", options, f"v{k}", trace)


def largest(rng, level):
    """choice: which option is largest? running max carrying the letter. Level 0: 2 single digits."""
    n_opt, terms = ((2, 1), (3, 1), (3, 2), (4, 2), (4, 3))[level]
    while True:
        exprs = [[rng.randint(1, 9) for _ in range(terms)] for _ in range(n_opt)]
        sums = [sum(e) for e in exprs]
        if len(set(sums)) == n_opt:
            break
    options = [{"id": f"o{i}", "text": " + ".join(map(str, e)), "value": None} for i, e in enumerate(exprs)]
    trace = []
    best = 0
    for i, e in enumerate(exprs):
        val = f"{' + '.join(map(str, e))} = {sums[i]}" if terms > 1 else f"{sums[i]}"
        if i == 0:
            trace.append(f"{LETTERS[i]}) {val}, max {LETTERS[0]} {sums[0]}.")
        else:
            if sums[i] > sums[best]:
                best = i
            trace.append(f"{LETTERS[i]}) {val}, max {LETTERS[best]} {sums[best]}.")
    trace.append(f"So {LETTERS[best]}.")
    return _q("largest", level, "choice", "Which is the largest?", options, f"o{best}", trace)


FAMILIES = {"chain": chain, "compare": compare, "count": count, "largest": largest}

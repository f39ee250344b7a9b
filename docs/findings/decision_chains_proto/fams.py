"""Prototype families where a chain computes (scratch, not the pipeline)."""
import random

YES_NO = [{"id": "true", "text": "yes", "value": None}, {"id": "false", "text": "no", "value": None}]
VARS = "abcdefgh"


def _q(family, level, task, text, options, gold, trace):
    return {"family": family, "level": level, "task": task, "question": text, "options": options,
            "gold": gold, "target": {o["id"]: float(o["id"] == gold) for o in options}, "trace": "\n".join(trace)}


def _steps(rng, n, lo=0, hi=19):
    """A start value and n signed single-digit steps, every running value in [lo, hi]."""
    while True:
        v = rng.randint(1, 9)
        vals, ops = [v], []
        ok = True
        for _ in range(n):
            d = rng.randint(1, 9)
            sign = rng.choice("+-")
            nv = v + d if sign == "+" else v - d
            if not lo <= nv <= hi:
                sign = "-" if sign == "+" else "+"
                nv = v + d if sign == "+" else v - d
                if not lo <= nv <= hi:
                    ok = False
                    break
            ops.append((sign, d))
            vals.append(nv)
            v = nv
        if ok:
            return vals, ops


def _num_options(rng, gold, k=4, lo=0):
    cands = [x for x in range(gold - 3, gold + 4) if x != gold and x >= lo]
    opts = [gold] + rng.sample(cands, k - 1)
    rng.shuffle(opts)
    return opts


def chain(rng, level):
    """choice: composed look-ups with arithmetic. a = 4. b = a + 3. ... What is <last>?"""
    vals, ops = _steps(rng, level)
    names = VARS[:level + 1]
    stmts = [f"{names[0]} = {vals[0]}."]
    for i, (s, d) in enumerate(ops):
        stmts.append(f"{names[i + 1]} = {names[i]} {s} {d}.")
    gold = vals[-1]
    nums = _num_options(rng, gold)
    options = [{"id": f"o{i}", "text": str(x), "value": None} for i, x in enumerate(nums)]
    trace = [f"{names[0]} = {vals[0]}."]
    for i, (s, d) in enumerate(ops):
        trace.append(f"{names[i + 1]} = {vals[i]} {s} {d} = {vals[i + 1]}.")
    trace.append(f"So {names[-1]} is {gold}.")
    return _q("chain", level, "choice", " ".join(stmts) + f" What is {names[-1]}?", options,
              f"o{nums.index(gold)}", trace)


def compare(rng, level):
    """noul: is a running sum above a threshold? Level = number of steps."""
    vals, ops = _steps(rng, level)
    expr = str(vals[0]) + "".join(f" {s} {d}" for s, d in ops)
    gold_v = vals[-1]
    thr = gold_v + rng.choice([-2, -1, 1, 2]) if rng.random() < 0.8 else gold_v + rng.choice([-3, 3])
    thr = max(thr, 0)
    if thr == gold_v:
        thr += 1
    yes = gold_v > thr
    trace = [f"{vals[0]}."]
    for i, (s, d) in enumerate(ops):
        trace.append(f"{vals[i]} {s} {d} = {vals[i + 1]}.")
    trace.append(f"{gold_v} is {'more' if yes else 'not more'} than {thr}.")
    return _q("compare", level, "noul", f"Is {expr} more than {thr}?", YES_NO, "true" if yes else "false", trace)


FRUITS = ["apple", "pear", "plum", "grape", "lemon", "mango", "peach", "cherry", "melon", "banana"]
FILLER = ["stone", "river", "cloud", "table", "paper", "window", "garden", "bridge", "candle", "ladder",
          "mirror", "basket", "pillow", "rocket", "silver", "forest", "market", "letter", "jacket", "pocket"]


def count(rng, level):
    """score: how many fruits (0..4)? Level grows the list: 1, 3, 5, 7, 9 words."""
    n = (1, 3, 5, 7, 9)[level]
    k = rng.randint(0, min(4, n))
    items = rng.sample(FRUITS, k) + rng.sample(FILLER, n - k)
    rng.shuffle(items)
    options = [{"id": f"v{v}", "text": str(v), "value": float(v)} for v in range(5)]
    trace, seen = [], 0
    for w in items:
        f = w in FRUITS
        seen += f
        trace.append(f"{w}: {'fruit, ' + str(seen) if f else 'no, ' + str(seen)}.")
    trace.append(f"There are {k} fruits.")
    return _q("count", level, "score", f"How many fruits are in this list: {', '.join(items)}?", options, f"v{k}", trace)


def largest(rng, level):
    """choice: which sum is largest? Level 0: 2 plain numbers; then sums with more terms / options."""
    n_opt, terms = ((2, 1), (3, 1), (3, 2), (4, 2), (4, 3))[level]
    while True:
        exprs = [[rng.randint(1, 9) for _ in range(terms)] for _ in range(n_opt)]
        sums = [sum(e) for e in exprs]
        if len(set(sums)) == n_opt and (terms == 1 or max(sums) - sorted(sums)[-2] <= 3):
            break
    options = [{"id": f"o{i}", "text": " + ".join(map(str, e)), "value": None} for i, e in enumerate(exprs)]
    L = "ABCD"
    trace = []
    for i, e in enumerate(exprs):
        trace.append(f"{L[i]}: {' + '.join(map(str, e))} = {sums[i]}." if terms > 1 else f"{L[i]}: {sums[i]}.")
    best = sums.index(max(sums))
    trace.append(f"The largest is {L[best]}.")
    return _q("largest", level, "choice", "Which is the largest?", options, f"o{best}", trace)


FAMILIES = {"chain": chain, "compare": compare, "count": count, "largest": largest}

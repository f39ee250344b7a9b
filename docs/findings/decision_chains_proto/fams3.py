"""Prototype families v3: every copied token is anchored by a unique label (one-token induction),
every computed token is a local operation on the last few tokens."""
import random

YES_NO = [{"id": "true", "text": "yes", "value": None}, {"id": "false", "text": "no", "value": None}]
TAGS = "abcdefghijk"
LETTERS = "ABCDEFGH"


def _q(family, level, task, text, options, gold, trace):
    return {"family": family, "level": level, "task": task, "question": text, "options": options,
            "gold": gold, "target": {o["id"]: float(o["id"] == gold) for o in options}, "trace": trace}


def total(rng, level):
    """noul: a 4, b 3, c 2. Is the total more than 8?  Items 1, 2, 3, 4, 6 of values 1..4."""
    n = (1, 2, 3, 4, 6)[level]
    vals = [rng.randint(1, 4) for _ in range(n)]
    t = sum(vals)
    thr = max(0, t + rng.choice([-2, -1, 1, 2]))
    if thr == t:
        thr = t + 1
    yes = t > thr
    items = ", ".join(f"{TAGS[i]}{v}" for i, v in enumerate(vals))
    run, parts = 0, []
    for i, v in enumerate(vals):
        run += v
        parts.append(f"{TAGS[i]}{v}={run}")
    trace = ", ".join(parts) + f". {t}{'>' if yes else '<'}{thr} {'yes' if yes else 'no'}."
    return _q("total", level, "noul", f"{items}. Is the total more than {thr}?", YES_NO, "true" if yes else "false", trace)


FRUITS = ["apple", "pear", "plum", "grape", "lemon", "mango", "peach", "cherry", "melon", "banana"]
FILLER = ["stone", "river", "cloud", "table", "paper", "window", "garden", "bridge", "candle", "ladder",
          "mirror", "basket", "pillow", "rocket", "silver", "forest", "market", "letter", "jacket", "pocket"]


def count(rng, level):
    """score (0..4): a pear, b stone, c plum. How many fruits?  1, 3, 5, 7, 9 words."""
    n = (1, 3, 5, 7, 9)[level]
    k = rng.randint(0, min(4, n))
    words = rng.sample(FRUITS, k) + rng.sample(FILLER, n - k)
    rng.shuffle(words)
    options = [{"id": f"v{v}", "text": str(v), "value": float(v)} for v in range(5)]
    seen, parts = 0, []
    for i, w in enumerate(words):
        f = w in FRUITS
        seen += f
        parts.append(f"{TAGS[i]} {w} {'yes' if f else 'no'}{seen}")
    trace = ", ".join(parts) + f". So{seen}."
    items = ", ".join(f"{TAGS[i]} {w}" for i, w in enumerate(words))
    return _q("count", level, "score", f"{items}. How many fruits?", options, f"v{k}", trace)


def largest(rng, level):
    """choice: which option is largest? Options shuffled single digits: 2, 3, 4, 6, 8 options; running max."""
    n = (2, 3, 4, 6, 8)[level]
    nums = rng.sample(range(10), n)
    options = [{"id": f"o{i}", "text": str(x), "value": None} for i, x in enumerate(nums)]
    best, parts = 0, []
    for i, x in enumerate(nums):
        if x > nums[best]:
            best = i
        parts.append(f"{LETTERS[i]}) {x} max{LETTERS[best]}{nums[best]}")
    trace = ", ".join(parts) + f". So {LETTERS[best]}."
    return _q("largest", level, "choice", "Which is the largest?", options, f"o{best}", trace)


FAMILIES = {"total": total, "count": count, "largest": largest}

"""Prototype v4: pointer chasing. Keys upper-case, values lower-case, so each hop is one-token induction
through a learned case bijection; the readout must compose k look-ups in one pass."""
import random

LOW = "abcdefghjkmnpqrstuvw"
LETTERS = "ABCDEFGH"


def _q(family, level, task, text, options, gold, trace):
    return {"family": family, "level": level, "task": task, "question": text, "options": options,
            "gold": gold, "target": {o["id"]: float(o["id"] == gold) for o in options}, "trace": trace}


def hop(rng, level):
    """choice: A c, C f, F b, B d. Start at a, 3 steps. Chain: a c f b. So b."""
    k = level + 1
    n = max(k + 2, 5)
    nodes = rng.sample(LOW, n)
    perm = nodes[:]
    while True:
        rng.shuffle(perm)
        if all(a != b for a, b in zip(nodes, perm)):
            break
    nxt = dict(zip(nodes, perm))
    start = rng.choice(nodes)
    path = [start]
    for _ in range(k):
        path.append(nxt[path[-1]])
    pairs = [f"{a.upper()} {nxt[a]}" for a in nodes]
    rng.shuffle(pairs)
    end = path[-1]
    distract = [x for x in nodes if x != end]
    rng.shuffle(distract)
    opts = [end] + distract[:3]
    rng.shuffle(opts)
    options = [{"id": f"o{i}", "text": x, "value": None} for i, x in enumerate(opts)]
    text = ", ".join(pairs) + f". Start at {start}, {k} steps. Where do you end?"
    trace = f"at {start} " + " ".join(path[1:]) + f". So {end}."
    return _q("hop", level, "choice", text, options, f"o{opts.index(end)}", trace)


FAMILIES = {"hop": hop}

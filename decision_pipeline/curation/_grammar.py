"""Template grammar for the synthetic pool's clean and noise documents (private).

Each register is a generator over ``_lexicon`` templates with its own length profile
and layout (news: headline + dateline paragraphs; encyclopedic: long sectioned
articles; qa: question + answers; forum: short per-user lines). ``Draw`` feeds word
picks from one block of seeded uniforms per document, which is several times faster
than a ``Generator`` call per word and still fully determined by the caller's rng.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from decision_pipeline.curation import _lexicon as lx

REGISTERS: tuple[str, ...] = ("news", "encyclopedic", "qa", "forum")
_SLOT = re.compile(r"\{(\w+)\}")
_AN = re.compile(r"\b([Aa]) ([aeiou])")


def _compile(templates: list[str]) -> list[list[str]]:
    """Split templates once into alternating literal/slot parts (odd index = slot key)."""
    return [_SLOT.split(t) for t in templates]


_T = {
    "news": _compile(lx.NEWS_TEMPLATES),
    "encyclopedic": _compile(lx.ENCYCLOPEDIC_TEMPLATES),
    "qa_q": _compile(lx.QA_QUESTIONS),
    "qa_d": _compile(lx.QA_DETAILS),
    "qa_a": _compile(lx.QA_ANSWERS),
    "forum": _compile(lx.FORUM_TEMPLATES),
}


class Draw:
    """Word picks from a block of uniforms drawn per document: fast and still fully seeded.

    ``pick`` skews toward the head of each list (u**1.6) so word frequencies are
    Zipf-like, which gives an LM something realistic to learn.
    """

    def __init__(self, rng: np.random.Generator, block: int = 2048) -> None:
        self.rng, self.block = rng, block
        self.u: list[float] = rng.random(block).tolist()
        self.i = 0

    def unif(self) -> float:
        if self.i >= len(self.u):
            self.u, self.i = self.rng.random(self.block).tolist(), 0
        self.i += 1
        return self.u[self.i - 1]

    def pick(self, seq: list[str], skew: float = 1.6) -> str:
        return seq[int(len(seq) * self.unif() ** skew)]

    def randint(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi]."""
        return lo + int((hi - lo + 1) * self.unif())


def _fill(parts: list[str], lex: dict[str, list[str]], d: Draw) -> str:
    out = []
    for i, p in enumerate(parts):
        if i % 2 == 0:
            out.append(p)
        elif p == "D":
            out.append(str(d.randint(2, 95)))
        elif p == "Y":
            out.append(str(d.randint(1050, 1950)))
        elif p == "USER":
            out.append(_user(d))
        else:
            out.append(d.pick(lex[p]))
    s = _AN.sub(r"\1n \2", "".join(out))
    return s[0].upper() + s[1:]


def _user(d: Draw) -> str:
    return d.pick(lx.FORUM["U1"], 1.0) + "_" + d.pick(lx.FORUM["U2"], 1.0) + str(d.randint(1, 99))


def _sentences(key: str, lex: dict[str, list[str]], d: Draw, n: int) -> list[str]:
    tpl = _T[key]
    return [_fill(tpl[int(len(tpl) * d.unif())], lex, d) for _ in range(n)]


def _paragraphs(key: str, lex: dict[str, list[str]], d: Draw, target: int, lo: int, hi: int) -> list[str]:
    """Paragraphs of lo..hi sentences until ``target`` words are reached."""
    paras, words = [], 0
    while words < target:
        p = " ".join(_sentences(key, lex, d, d.randint(lo, hi)))
        paras.append(p)
        words += p.count(" ") + 1
    return paras


def _news(d: Draw) -> str:
    lex = lx.NEWS
    head = f"{d.pick(lex['N']).capitalize()} {d.pick(lex['V'])} in {d.pick(lex['L'])}"
    paras = _paragraphs("news", lex, d, d.randint(150, 450), 2, 5)
    paras[0] = f"{d.pick(lex['L'])}, {d.pick(lex['MON'])} {d.randint(1, 28)} - " + paras[0]
    return head + "\n\n" + "\n\n".join(paras)


def _encyclopedic(d: Draw) -> str:
    lex = lx.ENCYCLOPEDIC
    title = f"{d.pick(lex['A']).capitalize()} {d.pick(lex['N'])} of {d.pick(lex['L'])}"
    paras = _paragraphs("encyclopedic", lex, d, d.randint(300, 800), 4, 8)
    secs = list(lex["SEC"])
    out = [title]
    for i, p in enumerate(paras):
        if i > 0 and secs and d.unif() < 0.5:
            out.append(secs.pop(int(len(secs) * d.unif())))
        out.append(p)
    return "\n\n".join(out)


def _qa(d: Draw) -> str:
    lex, target = lx.QA, d.randint(70, 250)
    q = _sentences("qa_q", lex, d, 1)[0]
    parts = ["Q: " + q + " " + " ".join(_sentences("qa_d", lex, d, d.randint(1, 3)))]
    words = sum(p.count(" ") + 1 for p in parts)
    while words < target:
        a = "A: " + " ".join(_sentences("qa_a", lex, d, d.randint(3, 7)))
        parts.append(a)
        words += a.count(" ") + 1
    return "\n\n".join(parts)


def _forum(d: Draw) -> str:
    lex, target = lx.FORUM, d.randint(60, 220)
    lines = [f"Thread: {d.pick(lex['A'])} {d.pick(lex['N'])} {d.pick(lex['INTJ'])}"]
    words = 0
    while words < target:
        post = _user(d) + ": " + " ".join(s[0].lower() + s[1:] for s in _sentences("forum", lex, d, d.randint(1, 4)))
        lines.append(post)
        words += post.count(" ") + 1
    return "\n".join(lines)


CLEAN_GENERATORS: dict[str, Callable[[Draw], str]] = {
    "news": _news, "encyclopedic": _encyclopedic, "qa": _qa, "forum": _forum,
}


def noise_text(kind: str, d: Draw) -> str:
    """A web-noise page of the given kind (see ``pool.NOISE_KINDS``; near_dup is separate)."""
    if kind == "boilerplate":
        banner = [d.pick(lx.NOISE_BOILERPLATE, 1.0) for _ in range(d.randint(2, 4))]
        body = CLEAN_GENERATORS[REGISTERS[d.randint(0, 3)]](d).split("\n\n")[-1]
        return "\n".join(banner[:1] + [body] + banner[1:])
    if kind == "repeated":
        line = d.pick(lx.NOISE_REPEATED, 1.0)
        return "\n".join(line if d.unif() < 0.85 else d.pick(lx.NOISE_REPEATED, 1.0) for _ in range(d.randint(12, 40)))
    if kind == "junk":
        toks = [d.pick(lx.JUNK_TOKENS, 1.0) for _ in range(d.randint(60, 200))]
        return " ".join(toks)
    if kind == "short":
        if d.unif() < 0.5:
            return d.pick(lx.NOISE_SHORT, 1.0)
        words = CLEAN_GENERATORS[REGISTERS[d.randint(0, 3)]](d).split()
        return " ".join(words[: d.randint(3, 25)])
    raise ValueError(kind)


def near_dup_text(src: str, d: Draw, vocab: list[str]) -> str:
    """Copy ``src`` with a few words replaced (about 1.5% of words, at least one, never a no-op)."""
    parts = re.split(r"(\s+)", src)
    word_pos = [i for i in range(0, len(parts), 2) if parts[i]]
    k = max(1, round(0.015 * len(word_pos)))
    for _ in range(k):
        i = word_pos[int(len(word_pos) * d.unif())]
        j = int(len(vocab) * d.unif())
        parts[i] = vocab[j] if vocab[j] != parts[i] else vocab[(j + 1) % len(vocab)]
    return "".join(parts)

"""Template grammar for the synthetic pool's clean, off-register and noise documents (private).

Each register is a generator over ``_lexicon`` templates with its own length profile
and layout (news: headline + dateline paragraphs; encyclopedic: long sectioned
articles; qa: question + answers; forum: short per-user lines). Off-register pages (shop
listings, affiliate listicles) and the junk kinds (``noise_text``) are built the same way. ``Draw`` feeds word
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


_TARGET_NOUNS: list[str] = lx.NEWS["N"] + lx.QA["N"] + lx.FORUM["N"] + lx.ENCYCLOPEDIC["N"]
_SHOP_T = _compile(lx.SHOP_TEMPLATES)
_SEO_T = _compile(lx.SEO_TEMPLATES)
_FOREIGN_T = _compile(lx.FOREIGN_TEMPLATES)
_SPAM_T = _compile(lx.SPAM_LINES)
_STUFF_T = _compile(lx.STUFFING_PHRASES)


def _pick_tpl(tpl: list[list[str]], lex: dict[str, list[str]], d: Draw) -> str:
    return _fill(tpl[int(len(tpl) * d.unif())], lex, d)


class _Deck:
    """Templates dealt without replacement (reshuffled when used up): a page of affiliate copy does not
    repeat a whole sentence frame, so its repeated 5-grams stay below the repetition filter's threshold."""

    def __init__(self, tpl: list[list[str]], d: Draw) -> None:
        self.tpl, self.d, self.order = tpl, d, []

    def deal(self, lex: dict[str, list[str]]) -> str:
        if not self.order:
            self.order = list(range(len(self.tpl)))
            for i in range(len(self.order) - 1, 0, -1):  # Fisher-Yates on the document's own uniforms
                j = int((i + 1) * self.d.unif())
                self.order[i], self.order[j] = self.order[j], self.order[i]
        return _fill(self.tpl[self.order.pop()], lex, self.d)


def _headline(d: Draw) -> str:
    """A teaser link: a headline of one of the target registers (what a link list on a web page shows)."""
    k = d.randint(0, 3)
    if k == 0:
        lex = lx.NEWS
        return f"{d.pick(lex['N']).capitalize()} {d.pick(lex['V'])} in {d.pick(lex['L'])}"
    if k == 1:
        lex = lx.ENCYCLOPEDIC
        return f"{d.pick(lex['A']).capitalize()} {d.pick(lex['N'])} of {d.pick(lex['L'])}"
    if k == 2:
        return "Q: " + _sentences("qa_q", lx.QA, d, 1)[0]
    return f"Thread: {d.pick(lx.FORUM['A'])} {d.pick(lx.FORUM['N'])} {d.pick(lx.FORUM['INTJ'])}"


def _shop(d: Draw) -> str:
    lex, target = lx.SHOP, d.randint(60, 260)
    lines = [f"{d.pick(lex['BR'])} {d.pick(lex['A'])} {d.pick(lex['PN'])}"]
    words, deck = 0, _Deck(_SHOP_T, d)
    while words < target:
        line = ("- " if d.unif() < 0.4 else "") + " ".join(deck.deal(lex) for _ in range(d.randint(1, 3)))
        lines.append(line)
        words += line.count(" ") + 1
    return "\n".join(lines)


def _seo(d: Draw) -> str:
    lex, n, deck = lx.SHOP, d.randint(3, 7), _Deck(_SEO_T, d)
    out = [f"The {n} best {d.pick(lex['PN'])} deals for {d.pick(lex['MON'])}",
           " ".join(deck.deal(lex) for _ in range(d.randint(1, 3)))]
    for i in range(1, n + 1):
        out.append(f"{i}. The {d.pick(lex['BR'])} {d.pick(lex['A'])} {d.pick(lex['PN'])}")
        out.append(" ".join(deck.deal(lex) for _ in range(d.randint(1, 3))))
    return "\n\n".join(out)


def _foreign(d: Draw) -> str:
    lex = lx.FOREIGN
    head = f"{d.pick(lex['FP'])} {d.pick(lex['FN'])} {d.pick(lex['FA'])}"
    paras, words = [], 0
    target = d.randint(120, 420)
    while words < target:
        p = " ".join(_pick_tpl(_FOREIGN_T, lex, d) for _ in range(d.randint(2, 6)))
        paras.append(p)
        words += p.count(" ") + 1
    return head + "\n\n" + "\n\n".join(paras)


# well-formed English web text in registers the target does not have: the classifier's job, not a filter's.
# (A third, `_foreign`, a page in another language, was tried and left out: its words took a fifth of the BPE
# vocabulary, and the decision questions' text took 11% more tokens; it remains the source of half the
# broken-encoding pages.)
OFF_REGISTER_GENERATORS: dict[str, Callable[[Draw], str]] = {"shop": _shop, "seo": _seo}
OFF_REGISTERS: tuple[str, ...] = tuple(OFF_REGISTER_GENERATORS)


def _boilerplate(d: Draw) -> str:
    """A navigation page: menu bar, a teaser, link lists of headlines and banner/footer lines (nine in ten carry
    a phrase the boilerplate filter knows; the rest are link farms the filters miss)."""
    lines = [" | ".join(["Home"] + [d.pick(lx.NAV, 1.0) for _ in range(d.randint(4, 9))])]
    body = CLEAN_GENERATORS[REGISTERS[d.randint(0, 3)]](d).split("\n\n")
    lines.append(body[0])
    lines.append(" ".join(body[-1].split()[: d.randint(15, 40)]) + " ... Read more")
    for _ in range(d.randint(1, 3)):
        lines.append(d.pick(lx.NAV_LINES, 1.0))
        lines.extend(_headline(d) for _ in range(d.randint(3, 8)))
    if d.unif() < 0.9:
        lines.extend(d.pick(lx.NOISE_BOILERPLATE, 1.0) for _ in range(d.randint(1, 3)))
    lines.append(" | ".join(["Home"] + [d.pick(lx.NAV, 1.0) for _ in range(d.randint(3, 7))]))
    return "\n".join(lines)


def _stuffing(d: Draw) -> str:
    """Keyword stuffing: a sentence of affiliate copy, then a few keyword phrases on the target's own nouns,
    repeated."""
    nouns = {"N": [d.pick(_TARGET_NOUNS, 1.0) for _ in range(d.randint(1, 3))]}
    phrases = [_fill(_STUFF_T[int(len(_STUFF_T) * d.unif())], nouns, d).lower() for _ in range(d.randint(3, 6))]
    head = _pick_tpl(_SHOP_T, lx.SHOP, d)
    body = ", ".join(phrases[int(len(phrases) * d.unif())] for _ in range(d.randint(15, 45)))
    return head + " " + body + "."


def _mojibake(d: Draw) -> str:
    """Broken encoding: a page in a Cyrillic-script language whose UTF-8 bytes were decoded as ASCII with
    replacement, so every letter became two U+FFFD (spaces, digits and punctuation survive), cut to 20-80 words.
    What the alpha_ratio filter targets (no letter is left). Pages read as cp1252 instead ("Ã" runs) were tried:
    once-broken ones pass that filter and the classifier scores them at its prior, and twice-broken ones cost the
    pool-trained BPE about 85 entries (docs/findings/curation_pool.md)."""
    s = " ".join(_foreign(d).split(" ")[: d.randint(20, 80)])
    s = "".join(lx.CYRILLIC.get(ch, ch) for ch in s)
    return s.encode("utf-8").decode("ascii", errors="replace")


def noise_text(kind: str, d: Draw) -> str:
    """A web-noise page of the given kind (see ``documents.NOISE_KINDS``; near_dup and off_register are separate)."""
    if kind == "boilerplate":
        return _boilerplate(d)
    if kind == "repeated":  # spam: one line (often on a target noun) over and over
        line = _pick_tpl(_SPAM_T, {"N": _TARGET_NOUNS}, d)
        return "\n".join(line if d.unif() < 0.85 else _pick_tpl(_SPAM_T, {"N": _TARGET_NOUNS}, d)
                         for _ in range(d.randint(12, 40)))
    if kind == "stuffing":
        return _stuffing(d)
    if kind == "mojibake":
        return _mojibake(d)
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
    """Copy ``src`` with a few words replaced (about 1.5% of words, at least one, never a no-op).

    A replaced word sits inside a line (after a space), where the replacement words occur in clean text: a
    lower-case noun at the start of a line is a spelling no clean document has, which the pool-trained BPE
    would learn as extra vocabulary (a page of only one line falls back to any word)."""
    parts = re.split(r"(\s+)", src)
    word_pos = [i for i in range(2, len(parts), 2) if parts[i] and "\n" not in parts[i - 1]]
    word_pos = word_pos or [i for i in range(0, len(parts), 2) if parts[i]]
    k = max(1, round(0.015 * len(word_pos)))
    for _ in range(k):
        i = word_pos[int(len(word_pos) * d.unif())]
        j = int(len(vocab) * d.unif())
        parts[i] = vocab[j] if vocab[j] != parts[i] else vocab[(j + 1) % len(vocab)]
    return "".join(parts)

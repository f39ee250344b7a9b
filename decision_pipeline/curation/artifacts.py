"""The artifact-token diagnosis: the share of detokenisation and web-noise tokens per register.

Why: a held-out set with no artifact tokens scored against a pool (or a selection) full of them
measures partly how much noise an arm trained on, not only what it learned; the research compared
this share per register, held-out vs pool. Tokens are whitespace tokens (tokenizer-free, so
`ingest` can report it before any tokenizer exists); a token is an artifact of the first kind in
``KINDS`` it matches, as a whole token:

- ``replacement_char``: U+FFFD or UTF-8 read as Latin-1 (``Ã©``, ``â€``, ``Â``): broken UTF-8;
- ``unk``: ``<unk>`` / ``[UNK]`` left by a tokenised corpus;
- ``markup``: an HTML entity (``&amp;``, ``&#39;``) or a tag without spaces (``<br>``, ``</p>``);
- ``wikitext_at``: ``@-@``, ``@,@``, ``@.@`` (WikiText's detokenisation markers);
- ``split_contraction``: a clitic standing alone (``n't``, ``'s``, ``'re``, ``'ve``, ``'ll``, ``'d``, ``'m``);
- ``space_before_punct``: closing punctuation standing alone (`` ,`` `` .`` `` ...`` `` )`` `` %``);
- ``symbol_run``: two or more symbols and no letter or digit (``##``, ``$$``, ``||``, ``=>``, ``{}``):
  what the default pool's ``junk`` pages are made of (``_lexicon.JUNK_TOKENS``);
- ``separator``: a lone menu separator (``|``, ``•``, ``·``, ``»``): the default pool's
  ``boilerplate`` banners (``_lexicon.NOISE_BOILERPLATE``).

Not artifacts, on purpose: a lone ``-`` (the news dateline ``Lisbon, May 3 - ...``) and ``>``
(forum ``a > b, change my mind``) are how those clean registers write; numbers, ``#42``, ``$19.99``,
``0x3f`` are ordinary tokens. The default generator writes no detokenisation artifacts into clean
text, so the first five kinds read 0 there; they are what an external pool (a web or tokenised
corpus) brings.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping

KINDS: tuple[str, ...] = ("replacement_char", "unk", "markup", "wikitext_at", "split_contraction",
                          "space_before_punct", "symbol_run", "separator")
_PATTERNS = {
    "replacement_char": r"\S*(?:\ufffd|Ã[\u0080-\u00bf]|â€|Â[\u00a0-\u00bf])\S*",
    "unk": r"<unk>|\[UNK\]",
    "markup": r"\S*(?:&(?:[A-Za-z]{2,8}|#\d{1,7}|#[xX][0-9A-Fa-f]{1,6});|</?[A-Za-z][A-Za-z0-9]*/?>)\S*",
    "wikitext_at": r"@[-,.]@",
    "split_contraction": r"(?:[nN]['’][tT]|['’](?:[sS]|[rR][eE]|[vV][eE]|[lL][lL]|[dD]|[mM]))",
    "space_before_punct": r"[,.;:!?%)\]}…]+",
    "symbol_run": r"[^\w\s]{2,}",
    "separator": r"[|•·»«]",
}
# one pass per text: alternatives in KINDS order, each anchored to a whole whitespace token
_TOKEN = re.compile(r"(?<!\S)(?:" + "|".join(f"(?P<{k}>{_PATTERNS[k]})" for k in KINDS) + r")(?!\S)")


def count_artifacts(text: str) -> tuple[int, Counter]:
    """(whitespace tokens, artifact tokens per kind) of one text."""
    kinds = Counter(m.lastgroup for m in _TOKEN.finditer(text))
    return len(text.split()), kinds


def _block(tokens: int, kinds: Counter, docs: int, docs_with: int) -> dict:
    n = sum(kinds.values())
    return {"docs": docs, "tokens": tokens, "artifact_tokens": n, "share": round(n / tokens, 6) if tokens else 0.0,
            "docs_with_artifacts": docs_with, "kinds": {k: kinds[k] for k in KINDS if kinds[k]}}


def artifact_shares(docs: Iterable[tuple[str, str]]) -> dict:
    """Artifact-token share of ``(register, text)`` pairs, overall and per register (sorted).

    ``share`` is artifact tokens / whitespace tokens, pooled over the documents (a long document
    weighs by its tokens, as a language model sees it); ``kinds`` counts each kind that occurs.
    """
    total: list = [0, Counter(), 0, 0]
    per: dict[str, list] = {}
    for register, text in docs:
        tokens, kinds = count_artifacts(text)
        for acc in (total, per.setdefault(register, [0, Counter(), 0, 0])):
            acc[0] += tokens
            acc[1].update(kinds)
            acc[2] += 1
            acc[3] += bool(kinds)
    return {**_block(*total), "by_register": {r: _block(*per[r]) for r in sorted(per)}}


def source_register(doc: Mapping) -> str:
    """The register a pool document was generated as (``meta_register``, read from ``meta_json`` in a
    stored pool; near-duplicates carry their source's, web noise is ``noise``); ``unlabelled`` when the
    pool does not say (an external pool). Reports only: selection never reads it."""
    reg = doc.get("meta_register") or doc.get("register")
    if not reg and isinstance(doc.get("meta_json"), str):
        try:
            meta = json.loads(doc["meta_json"])
        except ValueError:
            meta = {}
        reg = meta.get("meta_register") if isinstance(meta, dict) else None
    return str(reg) if reg else "unlabelled"

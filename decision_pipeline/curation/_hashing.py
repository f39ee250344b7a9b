"""Stable, vectorised 64-bit token hashing shared by MinHash shingling and classifier features.

Python's ``hash()`` is salted per process, and a ``hashlib`` call per token costs about
1 us, which dominated both MinHash and featurisation. Instead each chunk of documents
is lower-cased, UTF-8 encoded and joined into one byte array; token boundaries come
from a byte-class array, and each token is hashed from its bytes read 8 at a time
through an unaligned uint64 view (bytes past the token end masked off), combined with
multiply/xor-shift steps and finished with the splitmix64 mixer. Work is per token,
not per byte. Same text -> same hashes in every process and on every run.

Tokens: maximal runs of non-whitespace bytes, where whitespace = bytes <= 0x20 (ASCII
space and control characters). Texts with non-ASCII characters are first normalised
with ``" ".join(text.split())`` so Unicode spaces separate tokens too. With
``split_punct=True`` runs of ASCII punctuation become their own tokens
("fix it?" -> "fix", "it", "?"), which the register classifier uses.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_LEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xD6E8FEB86659FD93)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_CHUNK_CHARS = 1 << 19

_PUNCT = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_CLASS_PUNCT = np.ones(256, dtype=np.int8)  # 0 space/control, 1 word byte, 2 ASCII punctuation
_CLASS_PUNCT[:33] = 0
_CLASS_PUNCT[list(_PUNCT)] = 2


def mix64(h: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, in place on a uint64 array; returns it."""
    h ^= h >> np.uint64(30)
    h *= _M2
    h ^= h >> np.uint64(27)
    h *= _M3
    h ^= h >> np.uint64(31)
    return h


def _chunk(texts: Sequence[str], split_punct: bool) -> tuple[np.ndarray, np.ndarray]:
    bs = [(t if t.isascii() else " ".join(t.split())).lower().encode("utf-8") for t in texts]
    joined = b" " + b" ".join(bs) + b" "  # space-padded: every token has a class change on both sides
    n = len(joined)
    raw = np.frombuffer(joined + bytes(8), dtype=np.uint8)  # 8 zero bytes: reads past the end are safe
    buf = raw[:n]
    cls = _CLASS_PUNCT[buf] if split_punct else (buf > 32).view(np.int8)
    change = np.flatnonzero(cls[1:] != cls[:-1]) + 1
    if split_punct:  # segments [change[i], change[i+1]); keep the non-space ones
        keep = cls[change[:-1]] != 0
        starts, ends = change[:-1][keep], change[1:][keep]
    else:  # two classes alternate: space->word at starts, word->space at ends
        starts, ends = change[0::2], change[1::2]
    doc_start = np.ones(len(bs) + 1, dtype=np.int64)
    np.cumsum([len(b) + 1 for b in bs], out=doc_start[1:])
    doc_start[1:] += 1
    counts = np.diff(np.searchsorted(starts, doc_start))
    lens = ends - starts
    u64 = np.ndarray((n + 1,), dtype=np.uint64, buffer=raw, strides=(1,))  # element i = bytes i..i+7
    h = lens.astype(np.uint64) * _LEN
    act = None  # None = all tokens (first 8 bytes); then only tokens longer than 8*k bytes
    k = 0
    while act is None or len(act):
        rem = lens - 8 * k if act is None else lens[act] - 8 * k
        word = u64[(starts if act is None else starts[act]) + 8 * k]
        drop = (8 * (8 - np.minimum(rem, 8))).astype(np.uint64)  # little-endian: keep the low rem bytes
        word <<= drop
        word >>= drop
        hk = (h if act is None else h[act]) ^ word
        hk *= _M1
        hk ^= hk >> np.uint64(29)
        if act is None:
            h, act = hk, np.flatnonzero(rem > 8)
        else:
            h[act] = hk
            act = act[rem > 8]
        k += 1
    return mix64(h), counts


def token_hashes(texts: Sequence[str], split_punct: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """All docs' token hashes (uint64) concatenated in order, and offsets ``[n_docs + 1]``."""
    parts, counts = [], []
    i = 0
    while i < len(texts):
        j, size = i, 0
        while j < len(texts) and (j == i or size + len(texts[j]) < _CHUNK_CHARS):
            size += len(texts[j]) + 1
            j += 1
        h, c = _chunk(texts[i:j], split_punct)
        parts.append(h)
        counts.append(c)
        i = j
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    if parts:
        np.cumsum(np.concatenate(counts), out=offsets[1:])
    return (np.concatenate(parts) if parts else np.empty(0, np.uint64)), offsets

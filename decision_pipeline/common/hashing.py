"""Stable hashing, splits and seeded generators: identical on every machine.

Why: Python's `hash()` is salted per process and global random state leaks
between calls; every choice here derives from SHA-256 of explicit inputs.
"""
from __future__ import annotations

import hashlib
import random
from typing import Mapping

import numpy as np


def sha256_int(*parts: object) -> int:
    """A 64-bit integer from SHA-256 of the parts joined by NUL bytes."""
    data = b"\x00".join(str(p).encode("utf-8") for p in parts)
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def stable_split(item_id: str, fractions: Mapping[str, float], salt: str = "split") -> str:
    """Assign `item_id` to a split by SHA-256 bucket; fractions are taken in given order.

    Example: {"pool": 0.5, "dev": 0.1, "eval": 0.25, "calibration": 0.15}.
    """
    total = sum(fractions.values())
    if any(f < 0 for f in fractions.values()):
        raise ValueError(f"split fractions must be non-negative, got {dict(fractions)}")
    if not fractions or abs(total - 1.0) > 1e-9:
        raise ValueError(f"split fractions must sum to 1, got {total}")
    u = sha256_int(salt, item_id) / 2**64
    acc = 0.0
    for name, frac in fractions.items():
        acc += frac
        if u < acc:
            return name
    return next(reversed(list(fractions)))


def make_rng(seed: int, *keys: object) -> np.random.Generator:
    """A numpy Generator for (seed, keys): independent streams per purpose."""
    return np.random.default_rng(sha256_int(seed, *keys))


def make_random(seed: int, *keys: object) -> random.Random:
    """A stdlib Random for (seed, keys) (for choice/shuffle over Python lists)."""
    return random.Random(sha256_int(seed, *keys))


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def stable_subset(items: list[dict], n: int, salt: str, key: str = "id") -> list[dict]:
    """The first `n` items in SHA-256 order of their ids: a seed-free, machine-independent
    sample that keeps every family in proportion (a prefix of an id-sorted list would not)."""
    ranked = sorted(items, key=lambda it: (sha256_int(salt, it[key]), it[key]))
    return ranked[:n]

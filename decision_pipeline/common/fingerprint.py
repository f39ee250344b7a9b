"""Fingerprints of models and runs: when may a resumable working directory be reused?

Why: a resumed stage must continue only the run it started (same config, data,
base weights and code); anything else restarts. One definition here serves
generation, SFT, RL and the S1MB model revision.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any


WEIGHT_PATTERNS = ("config.json", "*.safetensors", "*.bin")


def model_fingerprint(model_dir: str | Path) -> str:
    """SHA-256 over a model directory's config and weight files (names and bytes)."""
    model_dir = Path(model_dir)
    h = hashlib.sha256()
    files = sorted({p for pattern in WEIGHT_PATTERNS for p in model_dir.glob(pattern) if p.is_file()})
    for path in files:
        h.update(path.name.encode() + b"\0")
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def run_fingerprint(*parts: Any) -> str:
    """16 hex digits over JSON-able parts (dataclasses as dicts, paths as file hashes by the caller)."""
    def plain(x: Any) -> Any:
        return dataclasses.asdict(x) if dataclasses.is_dataclass(x) and not isinstance(x, type) else x
    text = json.dumps([plain(p) for p in parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def code_fingerprint(*modules: Any) -> str:
    """SHA-256 over the source files of the given imported modules (training code changes restart)."""
    h = hashlib.sha256()
    for module in modules:
        h.update(Path(module.__file__).read_bytes())
    return h.hexdigest()[:16]

"""Read-only access to the tracked metrics, plot data and images the report is built from.

Why: the report must fail on bad input with one line naming the file and the
key (a missing key, a NaN, a plot data file with no rows, an unreadable image)
before anything is written, and must never load a model. Every number the
report prints goes through `Store.number`, so each is traceable to `file:key`.
"""
from __future__ import annotations

import glob
import json
import math
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError

_MISSING = object()


class MissingKey(PipelineError):
    """A metrics file or key a figure needs is absent: the report marks the figure instead of failing."""


def lookup(obj: Any, key: str) -> Any:
    """Value at a dotted key; keys that themselves hold dots ('0.002', 'at_0.3') resolve too.

    Returns `_MISSING` when no split of the key into existing nested keys works.
    """
    if not key:
        return obj
    if not isinstance(obj, dict):
        return _MISSING
    if key in obj:
        return obj[key]
    parts = key.split(".")
    for i in range(len(parts) - 1, 0, -1):        # longest first: 'routed_accuracy_at_0.3' before 'routed_accuracy_at_0'
        head = ".".join(parts[:i])
        if head in obj:
            found = lookup(obj[head], ".".join(parts[i:]))
            if found is not _MISSING:
                return found
    return _MISSING


class Store:
    """Metrics (JSON), plot rows (JSON lists) and images under one repository root."""

    def __init__(self, root: str | Path = "."):
        self.root = Path(root)
        self._json: dict[str, Any] = {}

    def path(self, rel: str) -> Path:
        return self.root / rel

    def exists(self, rel: str) -> bool:
        """True for an existing file, or for a glob pattern that matches at least one file."""
        return bool(self.glob(rel)) if any(c in rel for c in "*?[") else self.path(rel).is_file()

    def glob(self, pattern: str) -> list[str]:
        """Matching files as root-relative paths, sorted (stable figure order)."""
        hits = glob.glob(str(self.root / pattern), recursive=True)
        return sorted(str(Path(h).relative_to(self.root)) for h in hits if Path(h).is_file())

    def json(self, rel: str) -> Any:
        if rel not in self._json:
            path = self.path(rel)
            if not path.is_file():
                raise MissingKey(f"{rel}: file not found; run the stage that writes it (dvc repro)")
            try:
                self._json[rel] = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise PipelineError(f"{rel}: not valid JSON ({exc}); rerun the stage that writes it") from None
        return self._json[rel]

    def has(self, rel: str, key: str) -> bool:
        return self.exists(rel) and lookup(self.json(rel), key) is not _MISSING

    def raw(self, rel: str, key: str) -> Any:
        """Any JSON value at `key` (a missing key is an error naming file and key)."""
        value = lookup(self.json(rel), key)
        if value is _MISSING:
            raise MissingKey(f"{rel}: key '{key}' missing; rerun the stage that writes {rel}, "
                             f"or fix the report registry entry that reads it")
        return value

    def number(self, rel: str, key: str, nullable: bool = False) -> float | None:
        """A finite number at `key`; null only where the registry says it may be (e.g. 'no gap to recover')."""
        value = self.raw(rel, key)
        if value is None:
            if nullable:
                return None
            raise PipelineError(f"{rel}: key '{key}' is null; the report needs a number there")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PipelineError(f"{rel}: key '{key}' is {type(value).__name__} {value!r}, expected a number")
        if not math.isfinite(value):
            raise PipelineError(f"{rel}: key '{key}' is {value} (not finite); rerun the stage that writes {rel}")
        return float(value)

    def mapping(self, rel: str, key: str) -> dict:
        value = self.raw(rel, key)
        if not isinstance(value, dict):
            raise PipelineError(f"{rel}: key '{key}' is {type(value).__name__}, expected a mapping")
        return value

    def rows(self, rel: str, columns: tuple[str, ...]) -> list[dict]:
        """Plot data rows: a non-empty JSON list of objects, each with finite numbers (or text) in `columns`."""
        data = self.json(rel)
        if not isinstance(data, list):
            raise PipelineError(f"{rel}: expected a JSON list of rows, got {type(data).__name__}")
        if not data:
            raise PipelineError(f"{rel}: plot data file has no rows; rerun the stage that writes it")
        for i, row in enumerate(data):
            if not isinstance(row, dict):
                raise PipelineError(f"{rel}: row {i} is {type(row).__name__}, expected an object")
            for col in columns:
                if col not in row:
                    raise MissingKey(f"{rel}: row {i} has no key '{col}'")
                v = row[col]
                if isinstance(v, float) and not math.isfinite(v):
                    raise PipelineError(f"{rel}: row {i} key '{col}' is {v} (not finite)")
        return data

    def image(self, rel: str) -> Path:
        """An existing, decodable image file (checked now, so the PDF build cannot fail halfway)."""
        from PIL import Image, UnidentifiedImageError

        path = self.path(rel)
        if not path.is_file():
            raise PipelineError(f"{rel}: image not found; run the stage that draws it (dvc repro)")
        try:
            with Image.open(path) as img:
                img.load()
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
            raise PipelineError(f"{rel}: unreadable image ({exc}); rerun the stage that draws it") from None
        return path

"""Saving a PEFT adapter byte-identically from run to run.

Why: PEFT keeps `target_modules` as a set and writes it to `adapter_config.json` in the
set's iteration order, which depends on the interpreter's hash seed; the same adapter
then hashed differently on every run and DVC saw a changed `models/sft` and reran
everything downstream. The list is written sorted instead.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFIG_NAME = "adapter_config.json"


def save_adapter(peft_model: Any, directory: str | Path) -> None:
    """`peft_model.save_pretrained(directory)` with every list-valued set in its config sorted."""
    peft_model.save_pretrained(str(directory))
    path = Path(directory) / CONFIG_NAME
    config = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(canonical_config(config), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def canonical_config(config: dict) -> dict:
    """The config with `target_modules` (and PEFT's other module-name sets) in sorted order."""
    out = dict(config)
    for key in ("target_modules", "modules_to_save", "exclude_modules"):
        if isinstance(out.get(key), list):
            out[key] = sorted(out[key])
    return out

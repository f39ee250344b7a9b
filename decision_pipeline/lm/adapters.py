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


def canonical_generation_ids(generation_config: Any) -> None:
    """A one-element `eos_token_id` list becomes its int, in place.

    Why: a model trained in this process carries `eos_token_id: [2]` while the same model
    loaded back from a finished checkpoint (a resumed or forced rerun) carries `2`; the
    saved `generation_config.json` then differed and `models/sft` hashed differently.
    """
    for key in ("eos_token_id", "pad_token_id", "bos_token_id"):
        value = getattr(generation_config, key, None)
        if isinstance(value, (list, tuple)) and len(value) == 1:
            setattr(generation_config, key, int(value[0]))


def save_adapter_and_merged(peft_model: Any, merged: Any, tokenizer: Any, directory: str | Path) -> None:
    """What a training stage leaves: the adapter in `adapter/`, the merged model and its tokenizer beside it.

    One writer for SFT and RL, so both outputs hash the same whichever way the model was reached.
    """
    directory = Path(directory)
    save_adapter(peft_model, directory / "adapter")
    if getattr(merged, "generation_config", None) is not None:
        canonical_generation_ids(merged.generation_config)
    merged.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))

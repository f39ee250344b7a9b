"""YAML read the way DVC reads it: YAML 1.2 (ruamel's safe loader).

Why: `dvc exp run -S sft.lr=5e-5` makes DVC write `lr: 5e-05`. In YAML 1.2 (what DVC's ruamel
reads and writes) that is a float; in YAML 1.1 (PyYAML's `safe_load`) it is the string '5e-05',
and `yes`/`on` are booleans there but strings to DVC. Every file DVC reads or writes (params,
profiles, dvc.lock) and every value given as `-S`/`--set` is therefore parsed here, so a stage
sees exactly the value DVC tracks. Duplicate keys are an error (PyYAML silently kept the last).
"""
from __future__ import annotations

from typing import Any

from decision_pipeline.common.errors import PipelineError


def _loader():
    from ruamel.yaml import YAML

    return YAML(typ="safe")


def load_yaml(text: str, where: str) -> Any:
    """Parse `text` as YAML 1.2; a syntax error is a PipelineError naming `where` and the line."""
    from ruamel.yaml import YAMLError

    if text.startswith("\ufeff"):
        raise PipelineError(f"{where}: starts with a byte-order mark (UTF-8 BOM); save it as UTF-8 without BOM")
    try:
        return _loader().load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PipelineError(f"{where}{line}: not valid YAML ({' '.join(str(problem).split())})") from None


def load_value(raw: str, where: str) -> Any:
    """One scalar or flow value as `dvc exp run -S key=VALUE` would put it into params.yaml."""
    return load_yaml(raw, where) if raw.strip() else None

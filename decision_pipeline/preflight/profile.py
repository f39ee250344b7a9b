"""The merged params of a profile: params.yaml with profiles/<name>.yaml laid over it, in memory.

Why in memory: the preflight and the memory plan must judge exactly what a profile run will use
without writing params.yaml (writing it is `make profile`'s job, which refuses to overwrite edits).
"""
from __future__ import annotations

import copy
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import read_params_file


def merge_profile(base: dict, overlay: dict) -> dict:
    """Recursive merge: mappings merge key by key, anything else in the overlay replaces the base value."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_profile(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def profile_params(profile: str = "default", root: str | Path = ".", params: str | Path | None = None) -> dict:
    """The params a run of `profile` uses; `params` (a merged file) wins when given."""
    root = Path(root)
    if params:
        return read_params_file(params)
    base = read_params_file(root / "params.yaml")
    if profile in ("", "default"):
        return base
    path = root / "profiles" / f"{profile}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in (root / "profiles").glob("*.yaml"))
        raise PipelineError(f"{path}: profile {profile!r} not found; use one of default, {', '.join(names)}")
    return merge_profile(base, read_params_file(path))

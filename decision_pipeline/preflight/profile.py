"""The merged params of a profile: params.yaml with profiles/<name>.yaml laid over it, in memory.

Why in memory: the preflight and the memory plan must judge exactly what a profile run will use
without writing params.yaml (writing it is `make profile`'s job, which refuses to overwrite edits).
"""
from __future__ import annotations

from pathlib import Path

from decision_pipeline.common.params import read_params_file
from decision_pipeline.common.profiles import merge, read_overlay


def merge_profile(base: dict, overlay: dict) -> dict:
    """The one merge rule of profiles (decision_pipeline.common.profiles.merge): `None` drops a key."""
    return merge(base, overlay)


def profile_params(profile: str = "default", root: str | Path = ".", params: str | Path | None = None) -> dict:
    """The params a run of `profile` uses; `params` (a merged file) wins when given."""
    root = Path(root)
    if params:
        return read_params_file(params)
    base = read_params_file(root / "params.yaml")
    if profile in ("", "default"):
        return base
    return merge_profile(base, read_overlay(root, profile, base))

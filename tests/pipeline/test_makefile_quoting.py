"""Every make variable a person sets reaches the shell as one quoted word (#53): `make review BASE='x; touch y'`
runs no second command.

Why: the Makefile pasted BASE (and SOURCE, RUNS, RAY_POOL, PROFILE, GPU_GIB, MODEL_CONFIG, OUT) into its
recipes unquoted, and the pull-request workflow passes a branch name there; a `;`, `$(...)` or a backtick
in it ran as shell syntax. One real `make review` proves nothing runs; `make -n` shows, for every
variable, that the hostile value arrives as exactly one argument, byte for byte.
"""
from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "x; touch {marker} $(touch {marker}) `touch {marker}` it's"


def _env() -> dict[str, str]:
    """The environment without an outer make's flags, this checkout's code first."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}
    return {**env, "PYTHONPATH": str(ROOT), "PIPELINE_QUIET": "1"}


def test_make_review_with_a_hostile_base_runs_nothing_else(tmp_path: Path) -> None:
    marker = tmp_path / "touched"
    stamp = tmp_path / "installed"   # a fresh stamp: make installs nothing
    stamp.touch()
    base = HOSTILE.format(marker=marker)
    proc = subprocess.run(["make", "--no-print-directory", "review", f"STAMP={stamp}", f"BASE={base}"], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"error: --base {base}: not a commit in this repository" in proc.stderr, proc.stderr[-2000:]
    assert not marker.exists(), "a command inside BASE ran"


@pytest.mark.parametrize("target, variables, flag", [
    ("review", {"BASE": None}, "--base"),
    ("review", {"SOURCE": None}, "--source"),
    ("preflight", {"PROFILE": None}, "--profile"),
    ("preflight", {"GPU_GIB": None}, "--gpu-gib"),
    ("memory-plan", {"MODEL_CONFIG": None}, "--model-config"),
    ("ray-pool", {"RAY_POOL": None}, "--make-pool"),
    ("ray-pool", {"RAY_POOL_DOCS": None}, "--docs"),
    ("gpu-check", {"OUT": None}, "--out"),
    ("check", {"SET": None}, "--sets"),
    ("profile", {"PROFILE": None}, "profile"),
])
def test_each_variable_arrives_as_one_argument(tmp_path: Path, target: str, variables: dict, flag: str) -> None:
    stamp = tmp_path / "installed"
    stamp.touch()
    value = HOSTILE.format(marker=tmp_path / "touched")
    name = next(iter(variables))
    out = subprocess.run(["make", "--no-print-directory", "-n", target, f"STAMP={stamp}", f"{name}={value}"],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60).stdout
    command = next(line for line in out.splitlines() if f" {flag} " in line)
    argv = shlex.split(command)
    assert argv[argv.index(flag) + 1] == value, command


def test_runs_are_one_argument_each(tmp_path: Path) -> None:
    """RUNS="sft_seed=4 reseed=2" is a list: one quoted argument per item, none of them shell syntax."""
    stamp = tmp_path / "installed"
    stamp.touch()
    out = subprocess.run(["make", "--no-print-directory", "-n", "noise", f"STAMP={stamp}",
                          "RUNS=sft_seed=4 reseed=2;touch $(x)"], cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=60).stdout
    argv = shlex.split(out.splitlines()[0])
    assert argv[argv.index("--runs") + 1:] == ["sft_seed=4", "reseed=2;touch", "$(x)"], argv

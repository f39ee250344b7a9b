"""A run's params and metrics read from git: the committed run and its DVC experiments.

Why from git and not `dvc exp show`: an experiment is a commit (refs/exps/<baseline>/<name>) whose
tree holds every `cache: false` metrics file, including the detail files that dvc.yaml does not
declare as metrics (so `dvc exp show` stays a screen wide). Reading the tree sees all of them.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.yamlio import load_yaml


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise PipelineError(f"git {' '.join(args)}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    return proc.stdout


def exp_refs(baseline: str) -> dict[str, str]:
    """{experiment name: commit} of the experiments run from `baseline`."""
    out = {}
    for line in _git("for-each-ref", "--format=%(objectname) %(refname)", "refs/exps").splitlines():
        sha, ref = line.split(" ", 1)
        parts = ref.split("/")
        if len(parts) == 5 and parts[2] + parts[3] == baseline:
            out[parts[4]] = sha
    return out


def exp_refs_by_name() -> dict[str, str]:
    """{experiment name: commit} over every baseline, the newest of a name winning: for studies whose
    runs were started from several commits with the same params (the caller checks the params)."""
    out = {}
    for line in _git("for-each-ref", "--sort=creatordate", "--format=%(objectname) %(refname)",
                     "refs/exps").splitlines():
        sha, ref = line.split(" ", 1)
        parts = ref.split("/")
        if len(parts) == 5:
            out[parts[4]] = sha
    return out


def first_difference(a: Any, b: Any, prefix: str = "") -> str | None:
    """The first dotted key (sorted) whose value differs between two params trees, or None: what a
    study checks before it calls a run a variant of another."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            found = first_difference(a.get(k), b.get(k), f"{prefix}{k}.")
            if found:
                return found
        return None
    return None if a == b else prefix.rstrip(".")


def params_at(rev: str, path: str = "params.yaml") -> dict:
    data = load_yaml(_git("show", f"{rev}:{path}"), f"{rev[:12]}:{path}")
    if not isinstance(data, dict):
        raise PipelineError(f"{rev[:12]}:{path}: not a mapping of sections")
    return data


def metrics_at(rev: str, skip: Sequence[str] = ()) -> dict[str, Any]:
    """{path: parsed JSON} of every metrics/**.json in the commit's tree, but the paths starting with `skip`."""
    names = [n for n in _git("ls-tree", "-r", "--name-only", rev, "metrics/").splitlines()
             if n.endswith(".json") and not n.startswith(tuple(skip))]
    if not names:
        return {}
    proc = subprocess.run(["git", "cat-file", "--batch"], input="".join(f"{rev}:{n}\n" for n in names).encode(),
                          capture_output=True, check=True)
    out, buf = {}, proc.stdout
    for name in names:
        header, _, buf = buf.partition(b"\n")
        size = int(header.split()[2])
        blob, buf = buf[:size], buf[size + 1:]
        try:
            out[name] = json.loads(blob)
        except json.JSONDecodeError as exc:
            raise PipelineError(f"{rev[:12]}:{name}: not valid JSON (line {exc.lineno}); the run wrote a broken "
                                "metrics file, rerun it") from None
    return out

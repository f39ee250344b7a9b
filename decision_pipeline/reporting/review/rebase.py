"""The base revision's metrics recomputed on this machine, for a review that compares like with like.

Why: float kernels can differ between machines from the first step of pretraining, so main's committed
metrics, produced elsewhere, may differ from a rerun of main here by more than a one-line change does (a
fresh clone on another 2-core CPU once changed 61 tracked files, #34). `make review BASE=main RECOMPUTE=1`
checks the base out in a temporary git worktree that shares this checkout's DVC cache, hands it this
workspace's outputs and dvc.lock, and runs `dvc repro` there: DVC then reruns exactly the stages whose
code, params or inputs differ between the base and this workspace (and what they feed), so only what the
change under review touches costs time, and the review shows only what the change moved. DVC's own run
cache cannot do this here: it skips every stage with a `cache: false` output that is not a declared metric
or plot, which is how the detail metrics files stay out of `dvc exp show`.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.yamlio import load_yaml


DVC = [sys.executable, "-m", "dvc"]  # this environment's DVC, whatever PATH says


def _run(cmd: list[str], cwd: Path, what: str) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines() or ["failed"]
        raise PipelineError(f"{what}: {' '.join(cmd)} exited {proc.returncode}: {last[-1]}")
    return proc.stdout + proc.stderr


def cache_dir(root: Path) -> Path:
    """This checkout's DVC cache directory (`dvc cache dir`), absolute."""
    out = _run([*DVC, "cache", "dir"], root, "the DVC cache").strip().splitlines()
    if not out:
        raise PipelineError("dvc cache dir printed nothing; run `dvc cache dir` to see why")
    path = Path(out[-1])
    return path if path.is_absolute() else (root / path).resolve()


def _outputs(lock: Path) -> list[str]:
    """Every output path a dvc.lock records (the stages' `outs`)."""
    data = load_yaml(lock.read_text(encoding="utf-8"), str(lock))
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        raise PipelineError(f"{lock}: no stages recorded; run the pipeline (`make run`) before a review")
    return sorted({o["path"] for st in stages.values() if isinstance(st, dict)
                   for o in st.get("outs") or [] if isinstance(o, dict) and "path" in o})


def _copy(src: Path, dst: Path) -> None:
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    elif dst.exists() or dst.is_symlink():
        dst.unlink()
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst)


def recompute(base: str, read_metrics: Callable[[Path], dict[str, Any]],
              root: Path = Path(".")) -> tuple[dict[str, Any], dict[str, int]]:
    """(metrics, {"ran": n, "skipped": n}) of `base` reproduced here; the worktree is removed after.

    `read_metrics(path)` reads a checkout's metrics (review.workspace_metrics), so both sides of the
    review are read by the same code.
    """
    root = root.resolve()
    lock = root / "dvc.lock"
    if not lock.is_file():
        raise PipelineError("dvc.lock: missing; run the pipeline (`make run`) before a review")
    cache = cache_dir(root)
    outputs = _outputs(lock)
    with tempfile.TemporaryDirectory(prefix="review-base-") as tmp:
        tree = Path(tmp) / "base"
        _run(["git", "worktree", "add", "--detach", str(tree), base], root, f"--base {base}")
        try:
            _run([*DVC, "cache", "dir", "--local", str(cache)], tree, "sharing the DVC cache")
            # this workspace's run as the starting point: a stage whose code, params and inputs are the
            # same at the base is up to date against this lock and is skipped; the others rerun
            shutil.copy2(lock, tree / "dvc.lock")
            for rel in outputs:
                if (root / rel).exists():
                    _copy(root / rel, tree / rel)
            log = _run([*DVC, "repro"], tree, f"reproducing {base} in a worktree")
            counts = {"ran": log.count("Running stage '"), "skipped": log.count("didn't change, skipping")}
            return read_metrics(tree), counts
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=root, capture_output=True)


def summary(base: str, counts: dict[str, int]) -> str:
    return (f"[review] {base} recomputed on this machine: {counts['ran']} stages rerun, "
            f"{counts['skipped']} the same as this workspace's")

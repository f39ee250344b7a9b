"""The pipeline's files: the root dvc.yaml and its parts in pipelines/<part>/dvc.yaml, each with a dvc.lock.

Why several files: after every stage it runs, DVC re-parses and rewrites the stage's whole lock file
(ruamel's round trip), so that bookkeeping grows with the lock. Split by part of the chain, a stage
rewrites only its part's lock (docs/performance.md). `dvc repro`, `dvc status` and `dvc dag` see every
file; code that reads dvc.yaml or dvc.lock itself reads them all through here.
"""
from __future__ import annotations

from pathlib import Path

PARTS_DIR = "pipelines"


def pipeline_files(root: Path) -> list[Path]:
    """Every dvc.yaml of the pipeline under `root` that exists: the parts (in name order: charter,
    curation), then the root file (questions, decision model, report)."""
    parts = sorted((root / PARTS_DIR).glob("*/dvc.yaml"))
    return [p for p in (*parts, root / "dvc.yaml") if p.is_file()]


def lock_files(root: Path) -> list[Path]:
    """The dvc.lock beside each pipeline file, where DVC has written one."""
    return [p.with_name("dvc.lock") for p in pipeline_files(root) if p.with_name("dvc.lock").is_file()]


def address(root: Path, dvcfile: Path, name: str) -> str:
    """How DVC names a stage on its command line (`dvcfile`: a dvc.yaml or its dvc.lock): `name` in the root
    file, `pipelines/<part>/dvc.yaml:name` in a part."""
    rel = dvcfile.with_name("dvc.yaml").relative_to(root).as_posix()
    return name if rel == "dvc.yaml" else f"{rel}:{name}"

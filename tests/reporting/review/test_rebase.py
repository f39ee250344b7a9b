"""`make review RECOMPUTE=1` (reporting/review/rebase.py): what it reads from dvc.lock and its bad input.

The whole flow (a worktree of the base reproduced from this workspace's run) runs in the end-to-end
test after the README's experiment: tests/pipeline/test_end_to_end.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.review import rebase

LOCK = """schema: '2.0'
stages:
  items:
    cmd: python -m stages.items
    deps:
    - path: stages/items.py
      hash: md5
      md5: 0123
    outs:
    - path: data/items/items.parquet
      hash: md5
      md5: 4567
    - path: metrics/items.json
      hash: md5
      md5: 89ab
  curate@curated:
    cmd: python -m stages.curate curated
    outs:
    - path: data/curate/curated
      hash: md5
      md5: cdef.dir
    - path: metrics/items.json
      hash: md5
      md5: 89ab
"""


def test_outputs_are_every_stage_out_once(tmp_path: Path) -> None:
    lock = tmp_path / "dvc.lock"
    lock.write_text(LOCK)
    assert rebase._outputs(lock) == ["data/curate/curated", "data/items/items.parquet", "metrics/items.json"]


@pytest.mark.parametrize("text", ["schema: '2.0'\n", "[]\n", "stages: 3\n"])
def test_a_lock_without_stages_is_one_line_naming_it(tmp_path: Path, text: str) -> None:
    lock = tmp_path / "dvc.lock"
    lock.write_text(text)
    with pytest.raises(PipelineError, match=r"dvc.lock: no stages recorded; run the pipeline"):
        rebase._outputs(lock)


def test_no_lock_is_one_line_before_any_worktree(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match=r"^dvc.lock: missing; run the pipeline"):
        rebase.recompute("HEAD", lambda p: {}, tmp_path)
    assert not list(tmp_path.iterdir())

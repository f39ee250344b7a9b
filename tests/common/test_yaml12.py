"""Params read as DVC writes them (YAML 1.2), and `dvc exp run -S` that cannot hide its edit.

Why: `dvc exp run -S sft.lr=5e-5` made DVC write `5e-05`, which PyYAML (YAML 1.1) read back as a
string, so the most common experiment there is was refused. And a failed experiment left an edited
params.yaml that `git status` called clean in about half of the tries (common/gitindex.py).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dvc.utils.hydra import apply_overrides

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import load_section, read_params_file
from decision_pipeline.common.yamlio import load_yaml
from decision_pipeline.config import SECTIONS
from decision_pipeline.overrides import apply_sets

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("raw, value", [("5e-5", 5e-5), ("1e-4", 1e-4), ("2E-5", 2e-5), ("3.0e-4", 3e-4)])
def test_dvc_written_exponents_load_as_numbers(tmp_path, raw, value):
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    apply_overrides(params, [f"sft.lr={raw}"])  # DVC's own -S code path
    sft = load_section(SECTIONS["sft"], "sft", params)
    assert isinstance(sft.lr, float) and sft.lr == pytest.approx(value)
    assert apply_sets(read_params_file(ROOT / "params.yaml"), [f"sft.lr={raw}"], "params.yaml")["sft"]["lr"] == value


def test_yaml12_scalars_match_dvc():
    data = load_yaml("a: 5e-05\nb: yes\nc: on\nd: 1.0e-05\ne: 0o17\n", "t.yaml")
    assert data == {"a": 5e-05, "b": "yes", "c": "on", "d": 1e-05, "e": 15}


def test_duplicate_keys_and_bom_are_named(tmp_path):
    with pytest.raises(PipelineError, match=r"t.yaml:2: not valid YAML"):
        load_yaml("a: 1\na: 2\n", "t.yaml")
    with pytest.raises(PipelineError, match="byte-order mark"):
        load_yaml("\ufeffa: 1\n", "t.yaml")


STAGE = ("from decision_pipeline.common.params import read_params_file; import sys; "
         "sys.exit(2 if read_params_file()['a']['x'] < 0 else 0)")


@pytest.mark.slow
def test_ten_failed_experiments_never_hide_their_edit(tmp_path):
    """0.45 and -0.1 are the same size: without common/gitindex.py about half of these tries leave
    `git status` clean while params.yaml holds -0.1, so ten tries miss a regression once in ~1,000 runs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "DVC_NO_ANALYTICS": "1"}
    dvc = [sys.executable, "-m", "dvc"]

    def run(*cmd, check=True):
        return subprocess.run(list(cmd), cwd=tmp_path, env=env, capture_output=True, text=True, check=check)

    run("git", "init", "-q")
    run(*dvc, "init", "-q")
    (tmp_path / "params.yaml").write_text("a:\n  x: 0.45\n")
    (tmp_path / "dvc.yaml").write_text(f'stages:\n  s:\n    cmd: {sys.executable} -c "{STAGE}"\n'
                                       "    params: [a]\n")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "init")
    for attempt in range(10):
        proc = run(*dvc, "exp", "run", "-S", "a.x=-0.1", check=False)
        assert proc.returncode != 0, proc.stdout + proc.stderr
        assert "x: -0.1" in (tmp_path / "params.yaml").read_text()
        status = run("git", "status", "--porcelain", "params.yaml").stdout
        assert status.strip() == "M params.yaml", f"try {attempt}: git status hides the edit ({status!r})"
        run("git", "checkout", "--", "params.yaml")
        assert "x: 0.45" in (tmp_path / "params.yaml").read_text()
    # and the experiment everyone runs first: DVC writes 5e-05, the stage reads a number (a string
    # would fail the stage's `< 0`)
    proc = run(*dvc, "exp", "run", "-S", "a.x=5e-5", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "x: 5e-05" in (tmp_path / "params.yaml").read_text()

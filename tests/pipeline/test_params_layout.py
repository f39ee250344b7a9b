"""params.yaml is kept in the layout DVC writes, so `dvc exp run -S key=value` changes one line.

Why: DVC re-dumps the whole params file when it applies `-S` (ruamel, block style); a file in
another layout was rewritten wholesale (112 lines for one knob), which buries the one change a
reviewer must see in `git diff` and leaves a failed experiment's value in the workspace noisily.
The test applies overrides with DVC's own function, the one `dvc exp run -S` calls.
"""
from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
from dvc.utils.hydra import apply_overrides

ROOT = Path(__file__).resolve().parents[2]


def _changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@pytest.fixture
def params(tmp_path) -> Path:
    path = tmp_path / "params.yaml"
    shutil.copy2(ROOT / "params.yaml", path)
    return path


def test_params_yaml_is_already_in_dvcs_layout(params):
    before = params.read_text()
    apply_overrides(params, ["base.seed=" + str(__import__("yaml").safe_load(before)["base"]["seed"])])
    assert _changed_lines(before, params.read_text()) == []


@pytest.mark.parametrize("override", ["rl.lr=0.0025", "sft.max_steps=1500", "curate.overfill=2.2",
                                      "pretrain.model.hidden_size=96"])
def test_one_override_changes_one_line(params, override):
    before = params.read_text()
    apply_overrides(params, [override])
    changed = _changed_lines(before, params.read_text())
    assert len(changed) == 2, changed  # one line out, one line in
    key, value = override.rsplit("=", 1)
    assert changed[1].strip().endswith(f"{key.rsplit('.', 1)[1]}: {value}")

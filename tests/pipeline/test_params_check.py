"""`make check`: every params section (and -S overrides) through its typed loader, all errors at once.

Why: a typo in `rl.*` used to surface only when `rl` ran, about 20 minutes into a run; an unknown
section passed a plain `dvc repro`. The check runs first in `make run` and takes seconds.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from decision_pipeline.config import SECTIONS, apply_sets, collect_errors

ROOT = Path(__file__).resolve().parents[2]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def _check(tmp_path: Path, data: dict, *sets: str) -> subprocess.CompletedProcess:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    args = [a for s in sets for a in ("--set", s)]
    return subprocess.run([sys.executable, "-m", "decision_pipeline.config", "check", "--params", str(path), *args],
                          cwd=ROOT, capture_output=True, text=True)


def test_the_committed_params_pass(tmp_path):
    proc = _check(tmp_path, PARAMS)
    assert proc.returncode == 0, proc.stderr
    assert f"{len(SECTIONS)} sections OK" in proc.stdout


def test_a_typo_in_rl_fails_in_seconds_naming_the_key_and_its_twin(tmp_path):
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["rl"]["max_completion_lenght"] = data["rl"].pop("max_completion_length")
    started = time.perf_counter()
    proc = _check(tmp_path, data)
    seconds = time.perf_counter() - started
    print(f"make check with a typo in rl.*: {seconds:.2f}s")  # measured, not asserted (docs/performance.md)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, proc.stderr  # the misspelt key once, not again as "missing"
    assert "rl.max_completion_lenght: unknown key (did you mean 'max_completion_length'?)" in errors[0]


def test_every_error_is_listed_at_once(tmp_path):
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["sft"]["max_steps"] = -3
    data["sft"]["lora_rr"] = 8
    data["items"]["per_cell"] = "many"
    data["rl_typo"] = {}
    proc = _check(tmp_path, data)
    assert proc.returncode == 2
    err = proc.stderr
    for expected in ("section 'rl_typo' is unknown", "sft.max_steps: expected a value >= 1",
                     "sft.lora_rr: unknown key", "items.per_cell: expected an integer, got 'many'"):
        assert expected in err, err
    assert "4 error(s)" in err


def test_set_overrides_are_checked_like_dvc_exp_run_s(tmp_path):
    proc = _check(tmp_path, PARAMS, "rl.num_generations=zero", "curate.overfill=2.2")
    assert proc.returncode == 2 and "rl.num_generations: expected an integer, got 'zero'" in proc.stderr
    assert apply_sets(PARAMS, ["curate.overfill=2.2"], "params.yaml")["curate"]["overfill"] == 2.2
    bad = _check(tmp_path, PARAMS, "nosuch.key=1")
    assert bad.returncode == 2 and "--set nosuch.key=1: Could not override 'nosuch.key'" in bad.stderr  # as dvc exp run -S


def test_collect_errors_puts_back_the_culprit_so_the_next_error_shows():
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["sft"]["max_steps"] = 0
    data["sft"]["warmup_steps"] = -1
    errors = collect_errors(data, "p.yaml", PARAMS)
    assert [e.split(":")[1].strip() for e in errors] == ["sft.max_steps", "sft.warmup_steps"]


@pytest.mark.parametrize("text", ["", "- a\n- b\n"], ids=["empty", "a-list"])
def test_an_empty_or_non_mapping_params_file_is_one_line(tmp_path, text):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "decision_pipeline.config", "check", "--params", str(path)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and str(path) in proc.stderr and "mapping of sections" in proc.stderr


def test_prompt_files_are_checked_for_their_placeholders(tmp_path):
    bad = tmp_path / "reflect.md"
    bad.write_text((ROOT / "configs/prompts/small_base.md").read_text().replace("{document}", "{Document}"))
    proc = _check(tmp_path, PARAMS, f"reflect.candidates.small_base.prompt={bad}")
    assert proc.returncode == 2 and f"{bad}: placeholder {{Document}} is mis-cased" in proc.stderr

"""The noise study's plan file (reporting/review/noise_manifest.py, #53): a damaged plan is one line naming the
file and key for every command that reads it, and `--plan` never replaces another study unasked.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.review import noise_study as ns
from decision_pipeline.reporting.review.noise_manifest import read_manifest

ROOT = Path(__file__).resolve().parents[3]
SHA = "0123456789abcdef0123456789abcdef01234567"
GOOD = {"baseline": SHA, "runs": {"noise-reseed-1": {"source": "reseed", "overrides": {"base.seed": 11}}}}


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON (Expecting property name enclosed in double quotes, line 1)"),
    ("[1, 2]", "holds list, not the plan's JSON object"),
    (json.dumps({"runs": GOOD["runs"]}), "key 'baseline' is None, not a commit id"),
    (json.dumps({**GOOD, "baseline": "main"}), "key 'baseline' is 'main', not a commit id"),
    (json.dumps({**GOOD, "runs": ["noise-reseed-1"]}), "key 'runs' is list, expected a mapping"),
    (json.dumps({**GOOD, "runs": {"r": {"source": "moon", "overrides": {}}}}),
     "run 'r': source 'moon' is not one of reseed, data,"),
    (json.dumps({**GOOD, "runs": {"r": "reseed"}}), "run 'r' is str, expected {source, overrides}"),
    (json.dumps({**GOOD, "runs": {"r": {"source": "reseed", "overrides": [1]}}}), "run 'r': 'overrides' is [1]"),
    (json.dumps({**GOOD, "runs": {"r": {"source": "reseed", "overrides": {"a": None}}}}),
     "run 'r': 'overrides' is {'a': None}"),
    (json.dumps({**GOOD, "runs": {"r": {**GOOD["runs"]["noise-reseed-1"], "baseline": 5}}}),
     "run 'r': 'baseline' is 5, not a commit id"),
])
def test_a_damaged_plan_is_one_line_naming_file_and_key(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "noise_study.json"
    path.write_text(text)
    with pytest.raises(PipelineError) as err:
        read_manifest(path, ns.SOURCES, "no plan")
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value) and "\n" not in str(err.value)


def test_a_plan_in_utf16_or_absent_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "noise_study.json"
    path.write_bytes(json.dumps(GOOD).encode("utf-16"))
    with pytest.raises(PipelineError, match=r"is UTF-16 \(little-endian\) with a byte-order mark"):
        read_manifest(path, ns.SOURCES, "no plan")
    with pytest.raises(PipelineError, match=r"absent.json: no planned study$"):
        read_manifest(tmp_path / "absent.json", ns.SOURCES, "no planned study")
    path.write_text(json.dumps(GOOD))
    assert read_manifest(path, ns.SOURCES, "no plan") == GOOD


PARAMS = "base:\n  seed: 10\n"
RUNS = ["data=0", "pretrain_init=0", "pretrain_order=0", "sft_seed=0", "rl_seed=0", "curate_seed=0"]


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PYTHONPATH": str(ROOT)}
    root = tmp_path / "repo"
    root.mkdir()
    for cmd in (["git", "init", "-q"], ["git", "config", "commit.gpgsign", "false"]):
        subprocess.run(cmd, cwd=root, env=env, check=True)
    (root / "params.yaml").write_text(PARAMS)
    subprocess.run(["git", "add", "-A"], cwd=root, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "base"], cwd=root, env=env, check=True)
    return root, env


def _study(root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "decision_pipeline", "noise-study", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def test_plan_keeps_a_study_and_replaces_it_only_when_asked(repo) -> None:
    root, env = repo
    manifest = root / ns.MANIFEST
    assert _study(root, env, "--plan", "--runs", "reseed=3", *RUNS).returncode == 0
    first = manifest.read_bytes()
    assert sorted(json.loads(first)["runs"]) == ["noise-reseed-1", "noise-reseed-2"]
    again = _study(root, env, "--plan", "--runs", "reseed=3", *RUNS)          # `make noise` run again: the same plan
    assert again.returncode == 0 and manifest.read_bytes() == first
    other = _study(root, env, "--plan", "--runs", "reseed=2", *RUNS)
    lines = other.stderr.strip().splitlines()
    assert other.returncode == 2 and len(lines) == 1 and manifest.read_bytes() == first, other.stderr
    assert f"{ns.MANIFEST}: a study planned from " in lines[0] and "with 2 runs is recorded" in lines[0]
    assert "--replace (make noise REPLACE=1)" in lines[0]
    replaced = _study(root, env, "--plan", "--replace", "--runs", "reseed=2", *RUNS)
    assert replaced.returncode == 0 and sorted(json.loads(manifest.read_text())["runs"]) == ["noise-reseed-1"]
    manifest.write_text("{damaged")
    refused = _study(root, env, "--plan", "--runs", "reseed=2", *RUNS)
    assert refused.returncode == 2 and "(--replace writes the new plan over it)" in refused.stderr
    assert manifest.read_text() == "{damaged"


@pytest.mark.parametrize("command", [["--collect"], ["--collect", "--finished-only"], ["--run"],
                                     ["--extend", "rl_seed=2"]])
@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON"),
    (json.dumps({"baseline": SHA, "runs": []}), "key 'runs' is list"),
    (json.dumps({"runs": {}}), "key 'baseline' is None"),
    (json.dumps({"baseline": SHA, "runs": {"r": {"source": "moon", "overrides": {}}}}), "source 'moon'"),
])
def test_every_command_refuses_a_damaged_plan_in_one_line(repo, command, text, words) -> None:
    root, env = repo
    (root / ns.MANIFEST).parent.mkdir(parents=True, exist_ok=True)
    (root / ns.MANIFEST).write_text(text)
    proc = _study(root, env, *command)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith(f"error: {ns.MANIFEST}: ") and words in lines[0], lines
    assert not (root / "metrics").exists() and (root / ns.MANIFEST).read_text() == text

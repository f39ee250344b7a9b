"""The RL reward ablation (#35.6): one named experiment per variant, found under any baseline whose params
equal the committed run's but for the variant's keys; the quarter means hand-computed; a missing,
unfinished or confounded run is one line and nothing is written."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

spec = importlib.util.spec_from_file_location(
    "rl_ablation", Path(__file__).resolve().parents[2] / "scripts" / "rl_ablation.py")
ablation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation)

ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t"}
PARAMS = {"rl": {"lr": 0.002, "rewards": {"correctness": 1.0, "unfinished": 1.0, "length": 1.0, "format": 1.0},
                 "reward": {"unfinished": -1.5}}}


def _rounds(top: list[float], parsed: list[float]) -> list[dict]:
    return [{"round": i, "top_answer_share": t, "top_answer_gold_share": 0.4, "parsed_share": p,
             "right_given_parsed": 0.35} for i, (t, p) in enumerate(zip(top, parsed))]


def _commit(repo: Path, params: dict, top: list[float], evaluate: bool = True) -> str:
    (repo / "metrics/evaluate").mkdir(parents=True, exist_ok=True)
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    rl = {"reward_gain": {"diff": 0.16, "ci_low": 0.02, "ci_high": 0.32},
          "answer_collapse": _rounds(top, [0.6, 0.7, 0.8, 0.9, 0.9, 0.95, 0.95, 1.0])}
    (repo / ablation.RL).write_text(json.dumps(rl))
    ci = {"diff": 0.1, "ci_low": 0.05, "ci_high": 0.15, "baseline": 0.25, "model": 0.35}
    ev = {"vs_sft": {"thinking_accuracy": ci, "readout_accuracy": ci}, "thinking": {"parse_rate": 0.97},
          "rl_gate": {"passed": True}}
    (repo / ablation.EVAL).write_text(json.dumps(ev) if evaluate else "{}")
    subprocess.run(["git", "add", "-A"], cwd=repo, env=ENV, check=True)
    subprocess.run(["git", "commit", "-qm", "run", "--allow-empty"], cwd=repo, env=ENV, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def _ref(repo: Path, base: str, name: str, rev: str) -> None:
    subprocess.run(["git", "update-ref", f"refs/exps/{base[:2]}/{base[2:]}/{name}", rev], cwd=repo, check=True)


def _variant(name: str) -> dict:
    params = PARAMS
    for key, value in ablation.VARIANTS[name].items():
        params = ablation._set(params, key, value)
    return params


@pytest.fixture
def repo(tmp_path, monkeypatch) -> tuple[Path, str]:
    """The committed run, rl-noformat run from it, rl-binary run from a later commit with the same params."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    flat = [0.6] * 8
    base = _commit(tmp_path, PARAMS, [0.5, 0.6, 0.7, 0.7, 0.8, 0.8, 0.9, 0.9])
    _ref(tmp_path, base, "rl-noformat", _commit(tmp_path, _variant("rl-noformat"), flat))
    subprocess.run(["git", "checkout", "-q", base], cwd=tmp_path, check=True)
    later = _commit(tmp_path, PARAMS, [0.5, 0.6, 0.7, 0.7, 0.8, 0.8, 0.9, 0.9])
    _ref(tmp_path, later, "rl-binary", _commit(tmp_path, _variant("rl-binary"), flat))
    subprocess.run(["git", "checkout", "-q", later], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path, base


def test_commands_name_each_variant():
    assert [c[5] for c in map(str.split, _lines())] == list(ablation.VARIANTS)


def _lines() -> list[str]:
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert ablation.main([]) == 0
    return buf.getvalue().splitlines()


def test_collect_reads_every_variant_with_hand_computed_quarters(repo):
    root, base = repo
    out = root / "rl_ablation.json"
    assert ablation.main(["--collect", "--baseline", base, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["run"] for r in rows] == [f"the committed run {base[:12]}", "rl-noformat", "rl-binary"]
    # 8 rounds: quarters of 2; committed top share (0.5+0.6)/2 -> (0.9+0.9)/2, parsed (0.6+0.7)/2 -> (0.95+1)/2
    assert rows[0]["top_answer_share"] == {"first": 0.55, "last": 0.9}
    assert rows[0]["parsed_share"] == {"first": 0.65, "last": 0.975}
    assert rows[1]["top_answer_share"] == {"first": 0.6, "last": 0.6}
    assert rows[2]["overrides"] == {"rl.rewards.format": 0, "rl.rewards.length": 0, "rl.reward.unfinished": -1.0}
    assert rows[0]["reward_gain"] == {"diff": 0.16, "ci_low": 0.02, "ci_high": 0.32}
    assert rows[1]["vs_sft"]["thinking_accuracy"] == {"diff": 0.1, "ci_low": 0.05, "ci_high": 0.15}


def test_missing_unfinished_or_confounded_runs_are_one_line(repo, capsys):
    root, base = repo
    out = root / "rl_ablation.json"

    def one_line() -> str:
        assert ablation.main(["--collect", "--baseline", base, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: scripts/rl_ablation.py: "), err
        return err[0]
    subprocess.run(["git", "update-ref", "-d", f"refs/exps/{base[:2]}/{base[2:]}/rl-noformat"], cwd=root, check=True)
    assert "rl-noformat has no results" in one_line()
    _ref(root, base, "rl-noformat", _commit(root, ablation._set(_variant("rl-noformat"), "rl.lr", 0.004), [0.6] * 8))
    assert "rl-noformat differs from the committed run" in (line := one_line()) and "in rl.lr" in line
    _ref(root, base, "rl-noformat", _commit(root, _variant("rl-noformat"), [0.6] * 8, evaluate=False))
    assert "rl-noformat has no metrics/evaluate/rl.json:vs_sft" in one_line()
    assert not out.exists()

"""The SFT gold-only vs vote-mix ablation (#35.7): one queued experiment per ablated sft.target_mode, read
back with the committed (vote_mix) run from the runs' git trees, refused in one line while any is missing,
unfinished or confounded."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.errors import PipelineError

spec = importlib.util.spec_from_file_location(
    "sft_ablation", Path(__file__).resolve().parents[2] / "scripts" / "sft_ablation.py")
ablation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation)

ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t"}


def test_one_named_experiment_per_ablated_mode():
    assert ablation.commands() == [
        ["dvc", "exp", "run", "--queue", "--name", "sft-target-gold-only", "-S", "sft.target_mode=gold_only",
         "evaluate@sft"],
        ["dvc", "exp", "run", "--queue", "--name", "sft-target-gold-onehot", "-S", "sft.target_mode=gold_onehot",
         "evaluate@sft"]]


@pytest.mark.parametrize("modes, message", [
    (["gold-only"], "--modes gold-only is not an sft.target_mode; use gold_only, gold_onehot"),
    (["vote_mix"], "--modes vote_mix: the research's rule is the committed run"),
    (["gold_only", "gold_only"], "give each ablated mode once"),
])
def test_bad_modes_are_one_line(modes, message, capsys, tmp_path):
    out = tmp_path / "t.json"
    assert ablation.main(["--collect", "--modes", *modes, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("scripts/sft_ablation.py: ")
    assert not out.exists()


def test_first_difference_names_the_dotted_key():
    assert ablation.first_difference({"sft": {"a": 1, "b": [1]}}, {"sft": {"a": 1, "b": [1]}}) is None
    assert ablation.first_difference({"sft": {"a": 1, "b": 2}, "z": 0}, {"sft": {"a": 1, "b": 3}}) == "sft.b"
    assert ablation.first_difference({"rl": {"lr": 1}}, {}) == "rl"


def _commit(repo: Path, mode: str, dev_acc: float, votes: int = 0, evaluate: bool = True, max_steps: int = 2000,
            seed: int = 0) -> str:
    """A run's tree: params.yaml and the metrics files the collect reads."""
    (repo / "metrics/evaluate").mkdir(parents=True, exist_ok=True)
    (repo / "params.yaml").write_text(yaml.safe_dump(
        {"sft": {"target_mode": mode, "alpha": 0.5, "max_steps": max_steps, "seed_offset": seed},
         "rl": {"lr": 0.002}}))
    sft = {"chosen_lr": 0.002, "dev": {"accuracy": dev_acc, "nll": 1.0, "ece": 0.05, "n": 200},
           "readout_targets": {"total": 888, "soft": 150, "soft_from_item": 150, "with_model_votes": votes, "mode": mode}}
    (repo / ablation.SFT).write_text(json.dumps(sft))
    ci = {"point": dev_acc - 0.01, "ci_low": dev_acc - 0.05, "ci_high": dev_acc + 0.03}
    ev = {"n_items": 568, "ece_calibrated": 0.03, "decision_score": {"brier_skill": ci},
          "cis": {"readout_accuracy": ci, "thinking_accuracy": ci}}
    (repo / ablation.EVAL).write_text(json.dumps(ev) if evaluate else "{}")
    subprocess.run(["git", "add", "-A"], cwd=repo, env=ENV, check=True)
    subprocess.run(["git", "commit", "-qm", mode], cwd=repo, env=ENV, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def _ref(repo: Path, base: str, name: str, rev: str) -> None:
    subprocess.run(["git", "update-ref", f"refs/exps/{base[:2]}/{base[2:]}/{name}", rev], cwd=repo, check=True)


@pytest.fixture
def repo(tmp_path, monkeypatch) -> tuple[Path, str]:
    """A committed vote_mix run and the gold_only experiment run from it; gold_onehot not yet."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    base = _commit(tmp_path, "vote_mix", 0.52)
    _ref(tmp_path, base, "sft-target-gold-only", _commit(tmp_path, "gold_only", 0.50))
    monkeypatch.chdir(tmp_path)
    return tmp_path, base


def test_collect_reads_the_committed_run_and_each_experiment(repo):
    path, base = repo
    _ref(path, base, "sft-target-gold-onehot", _commit(path, "gold_onehot", 0.48))
    table = ablation.collect(base)
    assert [(r["mode"], r["dev"]["accuracy"]) for r in table["rows"]] == [
        ("vote_mix", 0.52), ("gold_only", 0.50), ("gold_onehot", 0.48)]
    assert table["rows"][0]["run"] == f"the committed run {base[:12]}"
    assert table["rows"][1]["eval"]["readout_accuracy"] == {"point": 0.49, "ci_low": 0.45, "ci_high": 0.53}
    # no vote reached a vote_mix target: the table says vote_mix and gold_only trained on the same targets
    assert table["votes_present"] is False and "cannot separate them" in table["note"]


def test_a_missing_mode_is_one_line_and_nothing_is_written(repo, capsys):
    path, base = repo
    out = path / "metrics" / "sft_ablation.json"
    assert ablation.main(["--collect", "--baseline", base, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"sft-target-gold-onehot has no results from {base[:12]}" in err[0]
    assert not out.exists()
    assert ablation.main(["--collect", "--baseline", base, "--modes", "gold_only", "--out", str(out)]) == 0
    assert [r["mode"] for r in json.loads(out.read_text())["rows"]] == ["vote_mix", "gold_only"]


@pytest.mark.parametrize("kw, message", [
    (dict(mode="gold_onehot", dev_acc=0.5, evaluate=False),
     "has no metrics/evaluate/sft.json:cis.readout_accuracy.point"),
    (dict(mode="vote_mix", dev_acc=0.5), "ran with sft.target_mode='vote_mix', not gold_onehot"),
    (dict(mode="gold_onehot", dev_acc=0.5, max_steps=500), "differs from the committed run in sft.max_steps"),
])
def test_unfinished_or_confounded_runs_are_refused(repo, kw, message):
    path, base = repo
    _ref(path, base, "sft-target-gold-onehot", _commit(path, **kw))
    with pytest.raises(PipelineError, match=message.replace("(", r"\(").replace(".", r"\.")):
        ablation.collect(base)


def test_votes_present_when_the_committed_run_used_them(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    base = _commit(tmp_path, "vote_mix", 0.55, votes=40)
    _ref(tmp_path, base, "sft-target-gold-only", _commit(tmp_path, "gold_only", 0.5))
    monkeypatch.chdir(tmp_path)
    table = ablation.collect(base, ["gold_only"])
    assert table["votes_present"] is True and table["note"] is None


def test_a_baseline_whose_run_is_not_the_rule_is_refused(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    base = _commit(tmp_path, "gold_only", 0.5)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PipelineError, match=f"the committed run {base[:12]} ran with sft.target_mode='gold_only', "
                                            "not vote_mix; collect against a commit whose run used the research's rule"):
        ablation.collect(base, ["gold_only"])


def test_seeded_commands_add_a_vote_mix_run_and_each_seeded_mode_per_seed():
    cmds = ablation.commands(["gold_only", "gold_onehot"], seeds=[1], seeded_modes=["gold_onehot"])
    assert cmds[2:] == [
        ["dvc", "exp", "run", "--queue", "--name", "sft-target-vote-mix-s1", "-S", "sft.target_mode=vote_mix",
         "-S", "sft.seed_offset=1", "evaluate@sft"],
        ["dvc", "exp", "run", "--queue", "--name", "sft-target-gold-onehot-s1", "-S", "sft.target_mode=gold_onehot",
         "-S", "sft.seed_offset=1", "evaluate@sft"]]


def test_seeded_collect_pairs_each_seed_with_the_vote_mix(repo):
    """Dev accuracy differences +0.10, +0.02, -0.04, +0.06, +0.01 over seeds 0-4 (hand-computed):
    mean +0.03, SD sqrt(0.0112/4) = 0.05292, t(0.975, 4) = 2.7764 -> half-width 0.06570: the interval
    [-0.0357, 0.0957] includes 0, so 'not detected'; with seeds 0-3 only it is 'not tested'."""
    path, base = repo  # base: vote_mix dev 0.52 at seed 0
    _ref(path, base, "sft-target-gold-onehot", _commit(path, "gold_onehot", 0.62))
    for k, (vote, hot) in enumerate([(0.50, 0.52), (0.54, 0.50), (0.40, 0.46), (0.45, 0.46)], start=1):
        _ref(path, base, f"sft-target-vote-mix-s{k}", _commit(path, "vote_mix", vote, seed=k))
        _ref(path, base, f"sft-target-gold-onehot-s{k}", _commit(path, "gold_onehot", hot, seed=k))
    table = ablation.collect(base, ["gold_only", "gold_onehot"], seeds=[1, 2, 3, 4], seeded_modes=["gold_onehot"])
    assert [(r["mode"], r["seed"]) for r in table["seed_rows"]][:3] == [
        ("vote_mix", 1), ("gold_onehot", 1), ("vote_mix", 2)]
    dev = table["paired"]["gold_onehot"]["dev_accuracy"]
    assert table["paired"]["gold_onehot"]["seeds"] == [0, 1, 2, 3, 4]
    assert dev["per_run"] == [0.1, 0.02, -0.04, 0.06, 0.01] and dev["n"] == 5
    assert dev["diff"] == pytest.approx(0.03) and dev["sd"] == pytest.approx(0.0529, abs=1e-4)
    assert dev["ci_low"] == pytest.approx(-0.0357, abs=1e-4) and dev["ci_high"] == pytest.approx(0.0957, abs=1e-4)
    assert dev["verdict"] == "not detected" and dev["detected"] is False
    short = ablation.collect(base, ["gold_onehot"], seeds=[1, 2, 3])
    assert short["paired"]["gold_onehot"]["dev_accuracy"]["verdict"] == "not tested"


def test_a_seeded_run_with_the_wrong_seed_or_missing_is_one_line(repo, capsys):
    path, base = repo
    _ref(path, base, "sft-target-gold-onehot", _commit(path, "gold_onehot", 0.62))
    _ref(path, base, "sft-target-vote-mix-s1", _commit(path, "vote_mix", 0.5, seed=2))
    with pytest.raises(PipelineError, match="sft-target-vote-mix-s1 differs from the committed run in sft.seed_offset"):
        ablation.collect(base, ["gold_onehot"], seeds=[1])
    _ref(path, base, "sft-target-vote-mix-s1", _commit(path, "vote_mix", 0.5, seed=1))
    out = path / "metrics" / "sft_ablation.json"
    assert ablation.main(["--collect", "--baseline", base, "--modes", "gold_onehot", "--seeds", "1",
                          "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sft-target-gold-onehot-s1 has no results" in err[0] and not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--seeds", "0"], "--seeds 0: give each extra sft.seed_offset once, each >= 1"),
    (["--seeds", "1", "1"], "--seeds 1 1: give each extra sft.seed_offset once"),
    (["--modes", "gold_only", "--seeds", "1", "--seeded-modes", "gold_onehot"],
     "--seeded-modes gold_onehot is not among --modes (gold_only)"),
])
def test_bad_seeds_are_one_line(args, message, capsys, tmp_path):
    out = tmp_path / "t.json"
    assert ablation.main(["--collect", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not out.exists()

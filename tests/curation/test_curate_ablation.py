"""The ablation grid (docs x the research's depths, M4 pooled, M6 token quotas at the winner's mix), each
a named queued experiment on pretrain@curated, read back on the tune set from the experiments' git trees."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError

spec = importlib.util.spec_from_file_location(
    "curate_ablation", Path(__file__).resolve().parents[2] / "scripts" / "curate_ablation.py")
ablation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation)

MIX = {"news": {"docs": 10, "tokens": 300}, "qa": {"docs": 20, "tokens": 600}, "forum": {"docs": 5, "tokens": 100}}


def test_winner_mix_and_grid():
    mix = ablation.winner_mix({"register_mix": MIX})
    assert mix == {"news": 0.3, "qa": 0.6, "forum": 0.1}
    g = ablation.grid(mix)
    assert list(g)[:2] == ["curate-docs-of1", "curate-docs-of1p6"] and len(g) == 7
    assert g["curate-m4-pooled"] == ["curate.mode=pooled", "curate.overfill=1.0"]
    assert g["curate-m6-tokens"][-1] == "++curate.weights={forum:0.1,news:0.3,qa:0.6}"
    assert ablation.command("x", ["a=1"], ablation.MICRO) == [
        "dvc", "exp", "run", "--queue", "--name", "x", "-S", "a=1", "-S", "curate.budget_tokens=15000",
        "-S", "curate.reserve=0.1", "pipelines/curation/dvc.yaml:pretrain@curated"]
    with pytest.raises(PipelineError, match="register_mix has no tokens"):
        ablation.winner_mix({})


def _commit(repo: Path, env: dict, ppl: list[float], mode: str, budget: int = 500000) -> str:
    (repo / "metrics/pretrain").mkdir(parents=True, exist_ok=True)
    (repo / "metrics/curate").mkdir(parents=True, exist_ok=True)
    (repo / "params.yaml").write_text(f"curate:\n  mode: {mode}\n  overfill: 1.0\n  budget_tokens: {budget}\n")
    tune = {"n": len(ppl), "ppl": ppl, "ppl_mean": sum(ppl) / len(ppl)}
    (repo / ablation.PPL).write_text(json.dumps({"tune_seeds": tune, "seeds": {"ppl": [99.0] * len(ppl)}}))
    (repo / ablation.CURATE).write_text(json.dumps({"register_mix": MIX, "fallback_docs": 3}))
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", mode, "--allow-empty"], cwd=repo, env=env, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def test_collect_reads_the_tune_set_and_pairs_with_the_committed_run(tmp_path, monkeypatch):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    base = _commit(tmp_path, env, [6.0, 7.0, 8.0], "docs")
    exp = _commit(tmp_path, env, [5.0, 7.5, 7.0], "pooled")
    subprocess.run(["git", "update-ref", f"refs/exps/{base[:2]}/{base[2:]}/curate-m4-pooled", exp], cwd=tmp_path,
                   check=True)
    monkeypatch.chdir(tmp_path)
    table = ablation.collect(base, ["curate-m4-pooled"])
    (r,) = table["rows"]
    assert (r["mode"], r["ppl_mean"], r["ppl_min"], r["fallback_docs"]) == ("pooled", 6.5, 5.0, 3)
    assert r["vs_committed"]["per_run"] == [-1.0, 0.5, -1.0] and r["vs_committed"]["verdict"] == "not tested"
    with pytest.raises(PipelineError, match="curate-m6-tokens has no results"):
        ablation.collect(base, ["curate-m4-pooled", "curate-m6-tokens"])
    # a point run from a later commit with the same params is found by name; one that also changed
    # another param is refused, naming it
    later = _commit(tmp_path, env, [6.0, 7.0, 8.0], "docs")
    m6 = _commit(tmp_path, env, [6.0, 6.0, 6.0], "tokens")
    subprocess.run(["git", "update-ref", f"refs/exps/{later[:2]}/{later[2:]}/curate-m6-tokens", m6], cwd=tmp_path,
                   check=True)
    assert [r["mode"] for r in ablation.collect(base, ["curate-m4-pooled", "curate-m6-tokens"])["rows"]] == \
        ["tokens", "pooled"]
    bad = _commit(tmp_path, env, [6.0, 6.0, 6.0], "tokens", budget=15000)
    subprocess.run(["git", "update-ref", f"refs/exps/{later[:2]}/{later[2:]}/curate-m6-tokens", bad], cwd=tmp_path,
                   check=True)
    with pytest.raises(PipelineError, match="curate-m6-tokens differs from .* in curate.budget_tokens"):
        ablation.collect(base, ["curate-m4-pooled", "curate-m6-tokens"])

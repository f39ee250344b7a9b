"""The noise study on a real DVC repository: experiments per source, spreads and claims read back from git.

The stage writes numbers that are a hand-computable function of the params, so every spread and the
claims verdict are checked exactly; the bad inputs (too few runs, a run that changes another param,
a run that failed) are one line each and leave metrics/ untouched.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.review import noise_study as ns

ROOT = Path(__file__).resolve().parents[3]
PARAMS = """base:
  seed: 10
items:
  seed_offset: 0
ingest:
  seed_offset: 0
pretrain:
  init_offset: 0
  order_offset: 0
sft:
  seed_offset: 0
rl:
  seed_offset: 0
"""
# readout diff = seed / 100 + sft.seed_offset / 1000; reward gain = seed % 3 - 1
STAGE = r"""
import json, os, yaml
p = yaml.safe_load(open("params.yaml"))
s, o = p["base"]["seed"], p["sft"]["seed_offset"]
os.makedirs("metrics/evaluate", exist_ok=True)
json.dump({"vs_base": {"readout_accuracy": {"diff": s / 100 + o / 1000}}, "drops": {"long": 2, **({"short": 1} if s % 2 else {})}},
          open("metrics/evaluate/sft.json", "w"))
json.dump({"reward_gain": {"diff": s % 3 - 1}}, open("metrics/rl.json", "w"))
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("noise_repo")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "DVC_NO_ANALYTICS": "1"}

    def run(*cmd):
        return subprocess.run(list(cmd), cwd=root, env=env, capture_output=True, text=True, check=True)

    run("git", "init", "-q")
    run(sys.executable, "-m", "dvc", "init", "-q")
    (root / "params.yaml").write_text(PARAMS)
    (root / "stage.py").write_text(STAGE)
    (root / "dvc.yaml").write_text(
        "stages:\n  s:\n    cmd: " + sys.executable + " stage.py\n    deps: [stage.py]\n    params: [base, sft]\n"
        "    metrics: [metrics/evaluate/sft.json: {cache: false}, metrics/rl.json: {cache: false}]\n")
    run(sys.executable, "-m", "dvc", "repro", "-q")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "baseline")
    head = run("git", "rev-parse", "HEAD").stdout.strip()
    study = [sys.executable, "-m", "decision_pipeline", "noise-study"]
    env["PYTHONPATH"] = str(ROOT)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"   # the `dvc` the study runs
    run(*study, "--plan", "--runs", "reseed=6", "sft_seed=2", "data=0", "pretrain_init=0", "pretrain_order=0",
        "rl_seed=0", "curate_seed=0")
    run(*study, "--run")                                     # each planned run: dvc exp run --temp
    again = run(*study, "--run").stdout                      # a second --run skips what has results
    assert again.count("has results, skipped") == 6
    todo = json.loads((root / ns.MANIFEST).read_text())["runs"]
    assert sorted(todo) == [f"noise-reseed-{i}" for i in range(1, 6)] + ["noise-sft_seed-1"]
    return root, head, todo


def _params(root: Path, rev: str) -> dict:
    import yaml
    return yaml.safe_load(subprocess.run(["git", "show", f"{rev}:params.yaml"], cwd=root, capture_output=True,
                                         text=True, check=True).stdout)


def _collect(root: Path, manifest: dict, finished_only: bool = False) -> dict:
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return ns.collect(manifest, finished_only)
    finally:
        os.chdir(cwd)


def test_spreads_per_source_and_claims_hand_computed(repo):
    root, head, todo = repo
    files = _collect(root, {"baseline": head, "runs": todo})
    assert set(files) == {"metrics/noise/reseed.json", "metrics/noise/sft_seed.json", "metrics/claims.json",
                          "metrics/noise/by_source.json"}
    reseed = files["metrics/noise/reseed.json"]
    assert reseed["n"] == 6 and reseed["runs"][0] == "baseline"
    diffs = [s / 100 for s in range(10, 16)]                      # seeds 10..15
    mean = sum(diffs) / 6
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 5)
    got = reseed["spread"]["metrics/evaluate/sft.json"]["vs_base.readout_accuracy.diff"]
    assert got == {"n": 6, "sd": float(f"{sd:.6g}"), "halfrange": 0.025, "mean": float(f"{mean:.6g}")}
    # drops.short exists in odd-seed runs only: a count table entry, 0 where it is missing
    assert reseed["spread"]["metrics/evaluate/sft.json"]["drops.short"]["halfrange"] == 0.5
    sft = files["metrics/noise/sft_seed.json"]["spread"]["metrics/evaluate/sft.json"]["vs_base.readout_accuracy.diff"]
    assert sft["n"] == 2 and sft["halfrange"] == 0.0005
    claims = files["metrics/claims.json"]["comparisons"]
    readout = claims["sft_vs_base_readout"]
    assert readout["n"] == 6 and readout["verdict"] == "detected" and readout["diff"] == round(mean, 4)
    gain = claims["rl_reward_gain"]                                # s % 3 - 1: 0 1 -1 0 1 -1 -> mean 0
    assert gain["verdict"] == "not detected" and gain["reason"] == "the 95% interval includes 0"
    # a claim whose metric no run carries is not judged (never a verdict drawn from nothing), and says why
    assert "curated_vs_random_ppl" not in claims
    assert files["metrics/claims.json"]["not_judged"]["curated_vs_random_ppl"].startswith("its metric is in 0 of the 6")
    # the family is the judged two: Holm doubles the smaller p (readout: t = 0.125 / (0.018708 / sqrt 6) = 16.37,
    # df 5, p 1.55e-05 -> 3.1e-05), and each verdict records raw and adjusted p
    assert files["metrics/claims.json"]["family_size"] == 2 and readout["adjustment"] == "holm over 2"
    assert readout["p"] == pytest.approx(1.55e-05, rel=0.01) and readout["p_adjusted"] == pytest.approx(3.1e-05, rel=0.01)
    assert gain["p"] == 1.0 and gain["p_adjusted"] == 1.0
    # the claim's SD per source: sft_seed's two runs differ by sft.seed_offset / 1000 -> sd 0.001 / sqrt 2
    by_source = files["metrics/noise/by_source.json"]
    assert by_source["sources"]["sft_seed"]["runs"] == ["baseline", "noise-sft_seed-1"]
    assert by_source["sources"]["sft_seed"]["not_run"] == []
    row = by_source["claims"]["sft_vs_base_readout"]
    assert row["reseed"]["sd"] == float(f"{sd:.6g}") and row["reseed"]["n"] == 6
    assert row["sft_seed"]["n"] == 2 and math.isclose(row["sft_seed"]["sd"], 0.001 / math.sqrt(2), rel_tol=1e-5)
    assert row["rl_seed"] == {"n": 1, "sd": None, "halfrange": 0.0, "mean": 0.1}  # the baseline alone: no spread


def test_bad_studies_are_one_line_and_write_nothing(repo, tmp_path):
    root, head, todo = repo
    with pytest.raises(PipelineError, match=r"--runs sft_seed=1: a spread needs >= 2 runs per source"):
        ns.parse_runs(["sft_seed=1"])
    assert ns.parse_runs(["sft_seed=0"])["sft_seed"] == 0 and not any(
        e["source"] == "sft_seed" for e in ns.plan({"base": {"seed": 1}}, ns.parse_runs(["sft_seed=0"])).values())
    with pytest.raises(PipelineError, match="expected SOURCE=N"):
        ns.parse_runs(["nosuch=3"])
    missing = {**todo, "noise-rl_seed-1": {"source": "rl_seed", "overrides": {"rl.seed_offset": 1}}}
    with pytest.raises(PipelineError, match=r"run noise-rl_seed-1 has no results .*`dvc exp run --queue --name "
                                            r"noise-rl_seed-1 -S rl.seed_offset=1"):
        _collect(root, {"baseline": head, "runs": missing})
    wrong = {**todo, "noise-sft_seed-1": {"source": "sft_seed", "overrides": {"sft.seed_offset": 2}}}
    with pytest.raises(PipelineError, match="run noise-sft_seed-1 changes"):
        _collect(root, {"baseline": head, "runs": wrong})
    assert not (root / "metrics" / "noise").exists() and not (root / "metrics" / "claims.json").exists()


def test_a_study_stopped_part_way_is_collected_as_what_it_is(repo):
    """--finished-only: the planned runs without results are named, the spreads and claims use the rest."""
    root, head, todo = repo
    planned = {**todo, "noise-reseed-6": {"source": "reseed", "overrides": {"base.seed": 16}},
               "noise-rl_seed-1": {"source": "rl_seed", "overrides": {"rl.seed_offset": 1}}}
    files = _collect(root, {"baseline": head, "runs": planned}, finished_only=True)
    reseed = files["metrics/noise/reseed.json"]
    assert reseed["n"] == 6 and reseed["not_run"] == ["noise-reseed-6"]
    assert files["metrics/noise/sft_seed.json"]["not_run"] == []
    assert "metrics/noise/rl_seed.json" not in files  # no finished run: no spread
    assert files["metrics/claims.json"]["not_run"] == ["noise-reseed-6"]
    assert files["metrics/claims.json"]["comparisons"]["sft_vs_base_readout"]["n"] == 6
    assert files["metrics/noise/by_source.json"]["sources"]["rl_seed"]["not_run"] == ["noise-rl_seed-1"]


def test_a_source_added_later_pairs_with_the_study_baseline(repo, tmp_path):
    """--extend: curate_seed planned after the study, started from a later commit that holds the same run
    (a new param at its default 0), run, and collected with the study's baseline: its readout moves by
    curate.seed_offset / 10000, so its SD over the two runs is 0.0001 / sqrt 2."""
    root, head, todo = repo
    clone = tmp_path / "later"
    subprocess.run(["cp", "-a", str(root), str(clone)], check=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "DVC_NO_ANALYTICS": "1", "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def run(*cmd, check=True):
        return subprocess.run(list(cmd), cwd=clone, env=env, capture_output=True, text=True, check=check)

    study = [sys.executable, "-m", "decision_pipeline", "noise-study"]
    (clone / "params.yaml").write_text(PARAMS + "curate:\n  seed_offset: 0\n")
    (clone / "stage.py").write_text(STAGE.replace("s / 100 + o / 1000", "s / 100 + o / 1000 + p['curate']['seed_offset'] / 10000"))
    (clone / "dvc.yaml").write_text((clone / "dvc.yaml").read_text().replace("params: [base, sft]",
                                                                            "params: [base, sft, curate]"))
    run(sys.executable, "-m", "dvc", "repro", "-q")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "curate.seed_offset")
    later = run("git", "rev-parse", "HEAD").stdout.strip()
    again = run(*study, "--extend", "sft_seed=3", check=False)
    assert again.returncode == 2 and "--extend sft_seed: already in the study" in again.stderr
    assert run(*study, "--extend", "curate_seed=1", check=False).returncode == 2     # N counts the baseline
    run(*study, "--extend", "curate_seed=2")
    manifest = json.loads((clone / ns.MANIFEST).read_text())
    assert manifest["baseline"] == head and manifest["runs"]["noise-curate_seed-1"] == {
        "source": "curate_seed", "overrides": {"curate.seed_offset": 1}, "baseline": later}
    out = run(*study, "--run").stdout                         # only the runs started from HEAD
    assert "noise-curate_seed-1" in out and "noise-reseed-1" not in out
    files = _collect(clone, manifest)
    row = files["metrics/noise/by_source.json"]["claims"]["sft_vs_base_readout"]["curate_seed"]
    assert row["n"] == 2 and math.isclose(row["sd"], 0.0001 / math.sqrt(2), rel_tol=1e-4)
    assert files["metrics/claims.json"]["comparisons"]["sft_vs_base_readout"]["n"] == 6   # reseeds unchanged

    # a later commit whose committed run differs from the study's is refused in one line, manifest untouched
    (clone / "stage.py").write_text(STAGE.replace("s / 100 + o / 1000", "s / 100 + o / 1000 + 0.5"))
    run(sys.executable, "-m", "dvc", "repro", "-q")
    run("git", "commit", "-qam", "another run")
    refused = run(*study, "--extend", "rl_seed=2", check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "does not hold the study's run (sft_vs_base_readout" in refused.stderr
    assert json.loads((clone / ns.MANIFEST).read_text()) == manifest


def test_cli_refuses_without_a_queued_study(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "decision_pipeline", "noise-study", "--collect"],
                          cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no planned noise study" in proc.stderr

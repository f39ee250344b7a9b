"""The claims file rejudged from its own per-run values: Holm over the family (hand-computed), the
committed file reproduced exactly, and bad input refused in one line with nothing written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.report.claims import check_claims
from decision_pipeline.reporting.review.claims_file import rejudge

ROOT = Path(__file__).resolve().parents[3]
RUNS = ["baseline", "r1", "r2", "r3", "r4"]


def _file(**per_run: list[float]) -> dict:
    return {"n_min": 5, "source": "reseed", "baseline": "abc", "comparisons": {
        name: {"label": name, "metric": f"+metrics/x.json:{name}.diff", "per_run": v, "runs": RUNS[:len(v)],
               "noise_source": "whole-chain reruns: sd of the difference"} for name, v in per_run.items()}}


def test_holm_over_the_family_hand_computed():
    # t-tests (df 4): strong mean 0.2, sd 0.0791, t 5.657, p 0.004813; weak mean 2.8, sd 1.789, t 3.5, p 0.02490;
    # null mean 0.04, t 0.112, p 0.9159 (twice). Holm over 4: strong 4 x 0.004813 = 0.01925; weak
    # max(0.01925, 3 x 0.02490) = 0.07469 -> not detected although its raw p and interval say detected alone;
    # the nulls min(1, 2 x 0.9159) = 1 and max(1, 0.9159) = 1
    out = rejudge(_file(strong=[0.3, 0.1, 0.2, 0.25, 0.15], weak=[3, 1, 4, 1, 5], null=[1, -1, 0.5, -0.5, 0.2],
                        null2=[1, -1, 0.5, -0.5, 0.2]), "claims.json")
    c = out["comparisons"]
    assert out["family_size"] == 4 and out["adjustment"] == "holm" and out["alpha"] == 0.05
    assert c["strong"]["p"] == pytest.approx(0.004813, abs=2e-6) and c["strong"]["p_adjusted"] == pytest.approx(0.01925, abs=1e-5)
    assert c["strong"]["verdict"] == "detected"
    assert c["weak"]["p"] == pytest.approx(0.02490, abs=1e-5) and c["weak"]["p_adjusted"] == pytest.approx(0.07469, abs=1e-5)
    assert c["weak"]["ci_low"] > 0 and c["weak"]["verdict"] == "not detected"
    assert "Holm-adjusted p 0.075" in c["weak"]["reason"]
    assert c["null"]["p"] == pytest.approx(0.9159, abs=1e-4) and c["null"]["p_adjusted"] == 1.0
    assert c["null2"]["p_adjusted"] == 1.0 and c["null"]["verdict"] == "not detected"
    # the verdict sits on the adjusted p; kept fields pass through, the report's reader accepts the file
    assert c["weak"]["runs"] == RUNS and c["weak"]["label"] == "weak" and out["baseline"] == "abc"
    assert [x.name for x in check_claims(out)[1]] == ["strong", "weak", "null", "null2"]
    assert rejudge(out, "claims.json") == out                              # a rejudge changes nothing twice


def test_the_committed_claims_file_recomputes_from_its_per_run_values():
    committed = json.loads((ROOT / "metrics/claims.json").read_text(encoding="utf-8"))
    assert rejudge(committed, "metrics/claims.json") == committed
    for name, c in committed["comparisons"].items():
        assert {"p", "p_adjusted", "adjustment", "family_size", "n_to_detect", "mde80_family"} <= set(c), name
        assert c["detected"] == (c["p_adjusted"] < 0.05 and c["verdict"] == "detected"), name


@pytest.mark.parametrize("edit,key", [
    (lambda d: d["comparisons"]["a"].pop("per_run"), "comparisons.a.per_run' missing"),
    (lambda d: d["comparisons"]["a"]["per_run"].__setitem__(2, float("nan")), "comparisons.a.per_run.2' is nan"),
    (lambda d: d["comparisons"]["a"].update(per_run=[0.1], runs=["baseline"]), "comparisons.a.per_run' holds [0.1]"),
    (lambda d: d.update(source="reseeds"), "key 'source' is 'reseeds', an unknown source"),
    (lambda d: d["comparisons"]["a"].update(metric="metrics/x.json a"), "comparisons.a.metric'"),
    (lambda d: d.update(n_min=1), "key 'n_min' is 1"),
])
def test_bad_input_is_one_line_naming_file_and_key(edit, key):
    data = _file(a=[0.3, 0.1, 0.2, 0.25, 0.15], b=[1, -1, 0.5, -0.5, 0.2])
    edit(data)
    with pytest.raises(PipelineError) as info:
        rejudge(data, "metrics/claims.json")
    assert str(info.value).startswith("metrics/claims.json: ") and key in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text,key", [
    ('{"n_min": 5, "source": "reseed", "comparisons": {"a": {"label": "a", "metric": "+m/x.json:k", "per_run": '
     '[0.1, NaN], "runs": ["baseline", "r1"], "noise_source": "x"}}}', "comparisons.a.per_run.1' is nan"),
    ("{not json", "not valid UTF-8 JSON"),
])
def test_the_rejudge_verb_exits_2_with_one_line_and_writes_nothing(tmp_path, text, key):
    (tmp_path / "metrics").mkdir()
    path = tmp_path / "metrics/claims.json"
    path.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "decision_pipeline", "noise-study", "--rejudge"], cwd=tmp_path,
                         env=env, capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "metrics/claims.json" in run.stderr and key in run.stderr
    assert path.read_text() == text and sorted(p.name for p in (tmp_path / "metrics").iterdir()) == ["claims.json"]


def test_the_rejudge_verb_rewrites_the_file(tmp_path):
    (tmp_path / "metrics").mkdir()
    path = tmp_path / "metrics/claims.json"
    path.write_text(json.dumps(_file(a=[3, 1, 4, 1, 5])))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "decision_pipeline", "noise-study", "--rejudge"], cwd=tmp_path,
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "1 comparisons rejudged, 1 detected" in run.stdout      # a family of one: Holm is the raw p
    assert json.loads(path.read_text())["comparisons"]["a"]["p_adjusted"] == pytest.approx(0.02490, abs=1e-5)


def test_the_review_lists_each_verdict_beside_the_base_and_marks_a_flip():
    from decision_pipeline.reporting.review.claims_file import review_section
    work = rejudge(_file(strong=[0.3, 0.1, 0.2, 0.25, 0.15], weak=[3, 1, 4, 1, 5], null=[1, -1, 0.5, -0.5, 0.2],
                         null2=[1, -1, 0.5, -0.5, 0.2]), "claims.json")
    base = {"comparisons": {"strong": {"verdict": "detected"}, "weak": {"verdict": "detected"}}}   # before Holm
    lines = review_section("main", base, work)
    assert "Holm's correction over the 4 comparisons" in lines[1]
    row = {ln.split(" | ")[0].lstrip("| "): ln for ln in lines if ln.startswith("| ") and "---" not in ln}
    assert row["weak"] == "| weak | detected | not detected (Holm p 0.075) | **verdict changed** |"
    assert row["strong"].endswith("| detected | detected (Holm p 0.019) |  |")
    assert row["null"].startswith("| null | \u2014 |")                     # the base did not judge it
    assert review_section("main", base, None) == []                        # no claims file: no section

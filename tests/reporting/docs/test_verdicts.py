"""One source of verdict words: every verdict the README, docs/ and the report (its PDF's text) state about
a claim agrees with metrics/claims.json; a flipped or missing one fails with the sentence and the claim.

The checker is tested on hand-written sentences first (so it can fail), then on the committed README, docs
and report, and on a report built with the claim lookup as it was before issue 50 (it fails there)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.reporting.docs import verdicts as V
from decision_pipeline.reporting.report import claims as C
from decision_pipeline.reporting.report.build import build_report

from ..conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[3]
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")), "report/report.pdf"]


def _claims() -> list[C.Claim]:
    return C.check_claims(json.loads((FIXTURES / "noise_study/claims.json").read_text()))[1]


def _problems(text: str) -> list[str]:
    return [s.problem for s in V.statements(text, _claims(), "t.md") if s.problem]


def test_a_flipped_verdict_fails_with_the_sentence_and_the_claim():
    # the fixture: sft_vs_base_readout detected, curated_vs_filtered_random not tested
    assert _problems("SFT minus base readout accuracy: detected over 6 runs.") == []
    bad = _problems("SFT minus base readout accuracy: not detected over 6 whole-chain runs.")
    assert len(bad) == 1 and "says 'not detected' about sft_vs_base_readout" in bad[0]
    assert '"sft minus base readout accuracy: not detected over 6 whole-chain runs."' in bad[0]
    assert "metrics/claims.json says: detected over 6 whole-chain runs" in bad[0]
    # a direction is a verdict too, and "no verdict" is wrong wherever the file judges the comparison
    assert _problems("Readout accuracy of sft vs base is higher by 0.12 (95% CI [0.08, 0.16]).") == []
    assert _problems("curated vs filtered_random held-out ppl is lower by 1.2.") != []
    assert _problems("curated vs filtered_random held-out ppl: not tested (3 runs).") == []
    assert _problems("Readout accuracy of sft vs base: +0.093; not yet judged (no verdict in metrics/claims.json).")


def test_each_verdict_belongs_to_the_mention_before_it_and_a_sentence_ends_it():
    text = ("SFT minus base readout accuracy detected; curated vs filtered_random held-out ppl not detected. "
            "The seed ranges overlap, so no difference detected.")
    found = V.statements(text, _claims(), "t.md")
    assert [(s.claim.name, s.phrase) for s in found] == [("sft_vs_base_readout", "detected"),
                                                         ("curated_vs_filtered_random", "not detected")]
    assert len([s for s in found if s.problem]) == 1          # curated is "not tested": too few runs, not a no
    # the longest alias wins where two overlap ("..., registers weighted equally" is its own claim)
    real = C.check_claims(json.loads((ROOT / "metrics/claims.json").read_text()))[1]
    hit = V.mentions(V.norm("curated − random held-out ppl, registers weighted equally"), real)
    assert [c.name for *_, c in hit] == ["curated_vs_random_ppl_equal_registers"]


def test_a_marker_that_words_a_verdict_from_one_runs_ci_on_a_claim_fails():
    claims = C.check_claims(json.loads((ROOT / "metrics/claims.json").read_text()))[1]
    one_run = 'The reward <!--m direction(rl:reward_gain, "rises", "falls", "does not move")-->rises<!--/m-->.'
    assert "word it from claims:comparisons.rl_reward_gain.verdict" in V.marker_problems(one_run, "d.md", claims)[0]
    judged = ('<!--m claims:comparisons.rl_reward_gain.verdict if claims:comparisons.rl_reward_gain.detected '
              'else direction(rl:reward_gain, "a", "b", "c")-->x<!--/m-->')
    assert V.marker_problems(judged, "d.md", claims) == []


def test_the_committed_readme_docs_and_report_state_the_claims_verdicts():
    problems = V.check(DOCS, ROOT)
    assert problems == [], "\n".join(problems)


def test_the_verb_exits_1_on_a_flipped_verdict(tmp_path):
    shutil.copytree(ROOT / "metrics", tmp_path / "metrics")
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    (tmp_path / "x.md").write_text("RL − SFT thinking accuracy: detected over the runs.\n")
    run = subprocess.run([sys.executable, "-m", "decision_pipeline", "verdicts", "--root", str(tmp_path), "x.md"],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert run.returncode == 1 and "about rl_vs_sft_thinking" in run.stderr, run.stderr
    (tmp_path / "metrics/claims.json").write_text("{}")
    run = subprocess.run([sys.executable, "-m", "decision_pipeline", "verdicts", "--root", str(tmp_path), "x.md"],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "metrics/claims.json: key 'comparisons'" in run.stderr


def _claim_for_before_issue_50(claims, file, key):
    """The lookup as it was: the metric string's file part kept its leading '+', so nothing matched."""
    for c in claims:
        cf, _, ck = c.metric.partition(":")
        if cf == file and (ck == key or ck.startswith(key + ".") or key.startswith(ck + ".")):
            return c
    return None


def test_the_check_fails_on_a_report_built_with_the_lookup_before_the_fix(tmp_path, monkeypatch):
    root = tmp_path / "run"
    shutil.copytree(FIXTURES, root)
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy2(ROOT / name, root / name)
    (root / "metrics/noise").mkdir(parents=True, exist_ok=True)
    shutil.copy2(FIXTURES / "noise_study/reseed.json", root / "metrics/noise/reseed.json")
    shutil.copy2(FIXTURES / "noise_study/claims.json", root / "metrics/claims.json")
    build_report(root, "report/report.pdf", "metrics/summary.json", "plots/report", root / "params.yaml")
    assert V.check(["report/report.pdf"], root) == []                     # the fixed lookup: consistent
    from decision_pipeline.reporting.report import registry, sections_data, sections_model
    for mod in (registry, sections_data, sections_model):
        monkeypatch.setattr(mod, "claim_for", _claim_for_before_issue_50)
    build_report(root, "report/report.pdf", "metrics/summary.json", "plots/report", root / "params.yaml")
    problems = V.check(["report/report.pdf"], root)
    assert any("about sft_vs_base_readout" in p and "not yet judged" in p for p in problems), problems

"""Sentences never claim more than the interval supports; dotted keys resolve; the registry matches dvc.yaml and README."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from decision_pipeline.reporting.report import narrative as N
from decision_pipeline.reporting.docs.readme import claims_at, readme_block, render_table
from decision_pipeline.reporting.report.sections import SECTIONS
from decision_pipeline.reporting.report.sources import _MISSING, Store, lookup

ROOT = Path(__file__).resolve().parents[3]


def test_difference_claimed_only_when_the_ci_excludes_zero():
    assert "higher by 0.182" in N.diff_ci("Readout", 0.182, 0.134, 0.233)
    assert "lower by 0.136" in N.diff_ci("ECE", -0.136, -0.151, -0.090)
    s = N.diff_ci("Thinking", 0.02, -0.01, 0.05)
    assert "no difference detected" in s and "higher" not in s and "lower" not in s


def test_arms_and_noise_rules():
    assert "do not overlap" in N.arms_ci("a", (0.3, 0.25, 0.35), "b", (0.6, 0.55, 0.65)) and \
        "is lower" in N.arms_ci("a", (0.3, 0.25, 0.35), "b", (0.6, 0.55, 0.65))
    assert "no difference detected" in N.arms_ci("a", (0.57, 0.53, 0.61), "b", (0.58, 0.54, 0.62))
    assert "beyond the noise" in N.vs_noise("ppl", 7.0, 10.1, 0.66)
    assert "no difference detected" in N.vs_noise("ppl", 7.0, 7.5, 0.66)
    assert "no difference is claimed" in N.point_only("Task Avg", 0.3, 0.0, "base")
    assert "indistinguishable" in N.below_floor("ECE", 0.03, 0.06) and "above" in N.below_floor("ECE", 0.1, 0.06)


def test_lookup_handles_keys_with_dots():
    obj = {"dev_nll": {"0.002": 0.9}, "cis": {"routed_accuracy_at_0.3": {"point": 0.5}}, "a": {"b": 1}}
    assert lookup(obj, "dev_nll.0.002") == 0.9
    assert lookup(obj, "cis.routed_accuracy_at_0.3.point") == 0.5
    assert lookup(obj, "a.b") == 1 and lookup(obj, "a.c") is _MISSING


def _covered(path: str, deps: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in deps)


def test_report_deps_cover_every_file_the_registry_reads():
    deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["report"]["deps"]
    store = Store(ROOT)
    extra = ("metrics/noise/*.json", "metrics/claims.json")     # read by the build itself (noise.py, claims.py)
    patterns = [pattern for sec in SECTIONS for pattern in sec.reads] + list(extra)
    missing = [p for pattern in patterns for p in store.glob(pattern) if not _covered(p, deps)]
    assert missing == [], f"add to the report stage's deps in dvc.yaml: {missing}"


def test_readme_results_table_matches_summary_json():
    summary = json.loads((ROOT / "metrics/summary.json").read_text())
    assert readme_block((ROOT / "README.md").read_text()) == render_table(summary, claims_at(ROOT / "metrics/claims.json"))


def test_collapse_sentence_skips_rounds_without_a_parsed_answer(tmp_path):
    """A micro RL round can parse no answer (top_answer_share None): the quarter means leave it out."""
    import json

    from decision_pipeline.reporting.report.sections_model import collapse_sentence
    from decision_pipeline.reporting.report.sources import Store
    rows = [{"round": i, "top_answer_share": v, "top_gold_share": 0.5}
            for i, v in enumerate([None, 0.6, 0.5, 0.5, 0.55, 0.7, 0.9, None])]
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "rl.json").write_text(json.dumps({"answer_collapse": rows}))
    text = collapse_sentence(Store(tmp_path))
    assert "went 0.60 \u2192 0.90" in text and "gold options' top share was 0.50 \u2192 0.50" in text
    # with the fair figure (how often the favourite answer is gold) the sentence compares against it
    fair = [dict(r, top_answer_gold_share=None if r["top_answer_share"] is None else g)
            for r, g in zip(rows, [0, 0.4, 0.4, 0.4, 0.4, 0.4, 0.3, 0])]
    (tmp_path / "metrics" / "rl.json").write_text(json.dumps({"answer_collapse": fair}))
    text = collapse_sentence(Store(tmp_path))
    assert "that answer was the gold one for 0.40 \u2192 0.30" in text and "one option" in text
    assert "Rollouts with a parsed answer" not in text  # runs without the split say nothing of it
    split = [dict(r, parsed_share=v, right_given_parsed=None if r["top_answer_share"] is None else 0.35)
             for r, v in zip(fair, [0.5, 0.7, 0.7, 0.8, 0.8, 0.9, 0.9, 0.95])]
    (tmp_path / "metrics" / "rl.json").write_text(json.dumps({"answer_collapse": split}))
    text = collapse_sentence(Store(tmp_path))
    assert "parsed answer went 0.60 \u2192 0.93, and of those the right share 0.35 \u2192 0.35" in text
    rows[6]["top_answer_share"] = None
    (tmp_path / "metrics" / "rl.json").write_text(json.dumps({"answer_collapse": rows}))
    assert "no parsed answer" in collapse_sentence(Store(tmp_path))

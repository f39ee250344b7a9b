"""The analysis entries of the report (improver loop, routers, cross-model routing, RL analyses):
each activates only with its keys, draws a real figure and states the hand-written numbers."""
from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

from decision_pipeline.reporting.report.build import build_report, make_plan
from decision_pipeline.reporting.report.sources import Store


def write(root: Path, rel: str, data) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(json.dumps(data))


def section(plan, sid):
    return next((text, figs) for s, text, _rows, figs in plan.active if s.id == sid)


def add_analysis_files(root: Path) -> None:
    hist = [{"version": 1, "accept_rate": 0.25, "rule": "missing_voice", "failures": {"missing_voice": 6}},
            {"version": 2, "accept_rate": 0.75, "rule": None, "failures": {"missing_voice": 2}}]
    write(root, "metrics/charter/improve/small_base.json",
          {"history": hist, "revisions": 1, "accept_rate_start": 0.25, "accept_rate_final": 0.75, "n_docs": 12,
           "stopped": "max_revisions", "follows_prompt": True})
    write(root, "metrics/charter/improve/ref_a.json",
          {"history": hist[:1], "revisions": 0, "accept_rate_start": 0.25, "accept_rate_final": 0.25, "n_docs": 12,
           "stopped": "no failure left", "follows_prompt": False})
    for m in ("base", "sft"):
        rel = f"metrics/evaluate/{m}.json"
        data = json.loads((root / rel).read_text())
        data["router"] = {"learned": {"fixable_auroc": 0.61}, "margin": {"fixable_auroc": 0.55}, "n_fixable": 9}
        (root / rel).write_text(json.dumps(data))
    pair = lambda a, b, acc: {"readout_model": a, "thinking_model": b,  # noqa: E731
                              "accuracy": {"point": acc, "ci_low": acc - 0.05, "ci_high": acc + 0.05},
                              "gain_over_readout": {"diff": acc - 0.4, "ci_low": acc - 0.45, "ci_high": acc - 0.35}}
    write(root, "metrics/cross_route.json", {"share": 0.3, "n": 20, "pairs": {
        "base->base": pair("base", "base", 0.40), "base->sft": pair("base", "sft", 0.48),
        "sft->base": pair("sft", "base", 0.41), "sft->sft": pair("sft", "sft", 0.45)}})
    (root / "plots/cross_route").mkdir(parents=True)
    Image.new("RGB", (400, 300), "seagreen").save(root / "plots/cross_route/routing.png")
    write(root, "metrics/rl.json", {
        "reward_gain": {"diff": 0.2, "ci_low": 0.1, "ci_high": 0.3},
        "answer_collapse": [{"round": r, "top_answer_share": 0.5 + 0.05 * r, "top_gold_share": 0.5} for r in range(4)],
        "difficulty_adjusted_reward": {"rounds": [{"round": r, "adjusted_reward": 0.01 * r} for r in range(4)],
                                       "slope_per_round": {"point": 0.01, "ci_low": 0.002, "ci_high": 0.018}}})


def test_analysis_entries_draw_and_state_their_numbers(run_root):
    add_analysis_files(run_root)
    build_report(run_root, "report/report.pdf", "metrics/summary.json", "plots/report", run_root / "params.yaml")
    plan = make_plan(Store(run_root))
    text, figs = section(plan, "evaluation")
    ids = [f.id for f in figs]
    assert "eval_routers" in ids and "eval_cross_routing" in ids
    assert any("base's readout with sft's thinking 0.480" in t and "vs 0.400 with its own thinking" in t for t in text)
    text, figs = section(plan, "charter")
    assert "charter_improver" in [f.id for f in figs]
    assert any("small_base: 1 revision(s), accept rate 0.25 -> 0.75 on 12 fresh documents" in t for t in text)
    assert any("ref_a" in t and "ignores its prompt" in t for t in text)
    text, figs = section(plan, "rl")
    assert "rl_analyses" in [f.id for f in figs]
    assert any("slope per round" in t and "0.010" in t for t in text)
    for fid in ("eval_routers", "charter_improver", "rl_analyses"):
        with Image.open(run_root / f"plots/report/{fid}.png") as img:
            assert img.size[0] > 300 and len(set(img.convert("L").getdata())) > 10   # drawn, not blank


def test_without_the_keys_the_entries_stay_out(run_root):
    plan = make_plan(Store(run_root))
    ids = [f.id for _s, _t, _r, figs in plan.active for f in figs]
    assert not {"eval_routers", "eval_cross_routing", "charter_improver", "rl_analyses"} & set(ids)


def test_ablation_table_becomes_a_curation_figure(run_root):
    rows = [{"mode": "docs", "overfill": of, "seeds": 3, "ppl_mean": m, "ppl_min": m - 0.2, "ppl_max": m + 0.3,
             "fallback_docs": fb} for of, m, fb in ((1.0, 6.1, 127), (1.6, 6.3, 0), (2.2, 6.6, 0))]
    write(run_root, "metrics/curate_ablation.json", {"rows": rows})
    build_report(run_root, "report/report.pdf", "metrics/summary.json", "plots/report", run_root / "params.yaml")
    _text, figs = section(make_plan(Store(run_root)), "curation")
    assert figs[-1].id == "curation_ablation"
    with Image.open(run_root / "plots/report/curation_ablation.png") as img:
        assert len(set(img.convert("L").getdata())) > 10

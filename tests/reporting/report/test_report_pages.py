"""The PDF page by page: every page renders, nothing overflows or overprints, no figure has a layout defect;
noise is labelled by its source; the claims file decides what is called detected; page 1 states the RL gate.

Pages are rendered with pypdfium2 (a locked wheel, no system package). Text positions come from the PDF's
text layer; figure defects from matplotlib's own geometry at build time (layout.figure_problems).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from reportlab.platypus import Table

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.report import pdf
from decision_pipeline.reporting.report.build import build_report, make_plan, run_meta
from decision_pipeline.reporting.report.claims import load_claims
from decision_pipeline.reporting.layout import figure_problems
from decision_pipeline.reporting.docs.readme import render_table
from decision_pipeline.reporting.report.sources import Store

from ..conftest import FIXTURES

A4_W, A4_H = 595.27, 841.89


def build(root: Path) -> dict:
    return build_report(root, "report/report.pdf", "metrics/summary.json", "plots/report", root / "params.yaml")


def add_study(root: Path) -> None:
    (root / "metrics/noise").mkdir(parents=True, exist_ok=True)
    shutil.copy2(FIXTURES / "noise_study/reseed.json", root / "metrics/noise/reseed.json")
    shutil.copy2(FIXTURES / "noise_study/claims.json", root / "metrics/claims.json")


def add_rl(root: Path, passed: bool = False) -> None:
    (root / "metrics/rl.json").write_text(json.dumps({
        "reward_gain": {"diff": 0.21, "ci_low": 0.05, "ci_high": 0.36},
        "answer_collapse": [{"round": r, "top_answer_share": 0.55 + 0.03 * r, "top_gold_share": 0.53} for r in range(12)],
        "difficulty_adjusted_reward": {"rounds": [{"round": r, "adjusted_reward": 0.01 * r} for r in range(12)],
                                       "slope_per_round": {"point": 0.01, "ci_low": 0.002, "ci_high": 0.018}}}))
    ev = json.loads((root / "metrics/evaluate/sft.json").read_text())
    ev["rl_gate"] = {"passed": passed, "baseline": "sft", "thinking_gain_significant": False,
                     "unfinished_fell": passed, "unfinished_diff": 0.0088}
    ev["vs_sft"] = {"thinking_accuracy": {"diff": 0.02, "ci_low": -0.03, "ci_high": 0.06}}
    (root / "metrics/evaluate/rl.json").write_text(json.dumps(ev))
    (root / "plots/evaluate/rl").mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "plots/evaluate/sft/accuracy_by_group.json", root / "plots/evaluate/rl/accuracy_by_group.json")
    routing = json.loads((root / "plots/evaluate/sft/routing.json").read_text())
    for row in routing:     # RL's own curve: a copy of SFT's would draw one line over the other (the page check says so)
        row["accuracy"] = round(min(1.0, row["accuracy"] + 0.02), 6)
        row["mean_thinking_tokens"] = round(0.8 * row["mean_thinking_tokens"], 6)
    (root / "plots/evaluate/rl/routing.json").write_text(json.dumps(routing))
    shutil.copy2(root / "plots/evaluate/sft/reliability.png", root / "plots/evaluate/rl/reliability.png")


def page_text_boxes(page) -> list[tuple[float, float, float, float]]:
    tp = page.get_textpage()
    return [tp.get_rect(i) for i in range(tp.count_rects())]


@pytest.fixture(scope="module")
def full_report(tmp_path_factory) -> Path:
    """One build with every optional entry active (RL, noise study, claims): the page checks share it."""
    root = tmp_path_factory.mktemp("full") / "run"
    shutil.copytree(FIXTURES, root)
    repo = Path(__file__).resolve().parents[3]
    shutil.copy2(repo / "dvc.yaml", root / "dvc.yaml")
    shutil.copy2(repo / "params.yaml", root / "params.yaml")
    add_study(root)
    add_rl(root)
    counts = build(root)
    (root / "counts.json").write_text(json.dumps(counts))
    return root


def test_every_page_renders_inside_its_margins_and_no_text_overprints(full_report, tmp_path):
    doc = pdfium.PdfDocument(str(full_report / "report/report.pdf"))
    counts = json.loads((full_report / "counts.json").read_text())
    assert len(doc) == counts["pages"]
    for i in range(len(doc)):
        page = doc[i]
        img = np.asarray(page.render(scale=0.5).to_pil().convert("L"), dtype=float)
        assert img.std() > 5, f"page {i + 1} is blank"
        h, w = img.shape
        margin = int(w * (pdf.MARGIN - 8) / A4_W)
        top = int(h * (pdf.MARGIN - 8) / A4_H)
        # nothing drawn in the side and top margins (content overflowing the frame would be)
        assert img[:, :margin].min() > 200 and img[:, w - margin:].min() > 200, f"page {i + 1}: ink in a side margin"
        assert img[:top, :].min() > 200, f"page {i + 1}: ink in the top margin"
        boxes = page_text_boxes(page)
        for (l, b, r, t) in boxes:
            assert pdf.MARGIN - 2 <= l and r <= A4_W - pdf.MARGIN + 2, f"page {i + 1}: text outside the frame"
        lines = sorted(boxes, key=lambda bx: (-bx[3], bx[0]))
        for a in range(len(lines)):
            for c in range(a + 1, len(lines)):
                (l1, b1, r1, t1), (l2, b2, r2, t2) = lines[a], lines[c]
                ox, oy = min(r1, r2) - max(l1, l2), min(t1, t2) - max(b1, b2)
                assert not (ox > 1 and oy > 1.5), f"page {i + 1}: text boxes overlap {lines[a]} / {lines[c]}"


def test_figures_have_no_layout_defects(full_report):
    counts = json.loads((full_report / "counts.json").read_text())
    assert counts["layout_problems"] == 0 and counts["figures_not_drawn"] == 0


def test_summary_and_claims_tables_fit_their_columns(full_report):
    store = Store(full_report)
    plan = make_plan(store)
    rows = [[pdf.judged(r.headline.label, r.verdict_text()), pdf.p(r.study_text(), "small"),
             pdf.p(r.this_run_text(), "small"), pdf.p(r.noise_text(), "small"), pdf._source(r)] for r in plan.rows]
    assert pdf.table_overflows(Table(rows), pdf.SUMMARY_COLS) == []
    claims = load_claims(store)[1]
    assert pdf.table_overflows(pdf.verdict_table(claims), pdf.VERDICT_COLS) == []
    assert pdf.table_overflows(pdf.claims_page(claims, 5)[0]._content[-1], pdf.CLAIMS_COLS) == []
    too_narrow = Table([[pdf.p("metrics/evaluate/sft.json:cis.routed_accuracy_at_0.3.point", "small")]])
    assert pdf.table_overflows(too_narrow, [60])           # the check itself finds an overflowing cell


def test_the_headline_is_the_study_mean_beside_this_run(full_report):
    summary = json.loads((full_report / "metrics/summary.json").read_text())
    # a claimed number: the claims file's mean and t-interval over per_run 0.10 0.12 0.14 0.11 0.13 0.12
    # (mean 0.12, sd 0.014142, t(0.975, 5) 2.5706 x 0.014142 / sqrt 6 = 0.014842 -> [0.1052, 0.1348])
    assert summary["sft_minus_base_readout_accuracy_study_mean"] == 0.12
    assert summary["sft_minus_base_readout_accuracy_study_ci_low"] == 0.1052
    assert summary["sft_minus_base_readout_accuracy_verdict"] == "detected"
    assert summary["sft_minus_base_readout_accuracy_claim"] == "sft_vs_base_readout"
    # an unclaimed number the study measured: mean 6.5, sd 0.51, n 6 -> 6.5 -+ 2.5706 x 0.51 / sqrt 6 = 0.5352
    assert summary["curated_heldout_ppl_study_mean"] == 6.5
    assert summary["curated_heldout_ppl_study_ci_low"] == pytest.approx(5.9648, abs=1e-4)
    assert "curated_heldout_ppl_verdict" not in summary
    table = render_table(summary)
    assert "| 6.50 [5.96, 7.04] (6 runs) | \u2014 |" in table        # headline first, no verdict: not a comparison
    doc = pdfium.PdfDocument(str(full_report / "report/report.pdf"))
    page2 = " ".join(doc[1].get_textpage().get_text_range().split())
    assert "mean over the whole-chain runs [95% t-interval]" in page2 and "6.50 [5.96, 7.04] (6 runs)" in page2


def test_noise_is_the_whole_chain_sd_where_measured_and_labelled(full_report):
    summary = json.loads((full_report / "metrics/summary.json").read_text())
    assert summary["curated_heldout_ppl_noise"] == 0.51
    assert summary["curated_heldout_ppl_noise_source"] == "reseed" and summary["curated_heldout_ppl_noise_n"] == 6
    assert summary["random_heldout_ppl_noise_source"] == "within-run"      # not in the study: within-run, said so
    table = render_table(summary)
    assert "SD \u00b10.51 (6 whole-chain runs)" in table
    assert "within-run \u00b1" in table and "pretrain seeds)" in table


def test_claims_decide_what_is_called_detected_and_page_one_states_the_gate(full_report):
    plan = make_plan(Store(full_report))
    text = {s.id: sentences for s, sentences, _r, _f in plan.active}
    sft = next(t for t in text["evaluation"] if t.startswith("Readout accuracy of sft vs base"))
    assert sft.startswith("Readout accuracy of sft vs base: detected over 6 whole-chain runs: mean +0.12 [+0.105, +0.135]")
    assert "Holm-adjusted p" in sft and "This run alone:" in sft
    rl = text["rl"]
    assert "higher by" not in rl[0] and "not called a difference" in rl[0]         # RL gain: no verdict
    assert "Answer collapse" in rl[0] and "0.58 \u2192 0.85" in rl[0]        # quarter means, by hand
    assert rl[1].startswith("The RL gate FAILED") and "thinking gain significant" in rl[1]
    key = next(s for s, *_ in plan.active if s.id == "rl").key_sentences
    assert key >= 2                                                              # both on page 1
    doc = pdfium.PdfDocument(str(full_report / "report/report.pdf"))
    page1 = " ".join(doc[0].get_textpage().get_text_range().split())
    assert "RL gate FAILED" in page1 and "Answer collapse" in page1
    page3 = " ".join(doc[2].get_textpage().get_text_range().split())
    assert "Claims From metrics/claims.json" in page3 and "not tested" in page3
    assert "fewer than the 5 a verdict needs" in page3 and "Holm's step-down rule over the 2 comparisons" in page3
    assert "detected" in page1 and "mean over the runs [95% t-interval]" in page1     # page 1: the study first


def test_without_study_or_claims_the_report_says_so(built):
    run_root, _, _ = built                                  # the fixture tree as it is: no study, no claims
    doc = pdfium.PdfDocument(str(run_root / "report/report.pdf"))
    page1 = " ".join(doc[0].get_textpage().get_text_range().split())
    assert "No whole-chain noise study yet" in page1 and "No claims file" in page1
    assert "Claims From metrics/claims.json" not in " ".join(doc[2].get_textpage().get_text_range().split())


def _edit_claims(edit) -> dict:
    data = json.loads((FIXTURES / "noise_study/claims.json").read_text())
    edit(data, data["comparisons"]["sft_vs_base_readout"])
    return data


@pytest.mark.parametrize("edit,expected", [
    (lambda d, c: c.update(verdict="maybe"), "key 'comparisons.sft_vs_base_readout.verdict' is 'maybe'"),
    (lambda d, c: c.update(verdict="not tested"),
     "key 'comparisons.sft_vs_base_readout.detected' is True but its verdict is 'not tested'"),
    (lambda d, c: c.pop("p_adjusted"), "key 'comparisons.sft_vs_base_readout.p_adjusted' missing"),
    (lambda d, c: c.update(diff=float("nan")), "key 'comparisons.sft_vs_base_readout.diff' is nan"),
    (lambda d, c: c.update(n=1, per_run=[0.1], runs=["baseline"]), "key 'comparisons.sft_vs_base_readout.n' is 1"),
    (lambda d, c: d.update(source="data"), "key 'source' is 'data'"),
])
def test_a_bad_claims_file_is_one_line_naming_the_key(run_root, edit, expected):
    (run_root / "metrics/claims.json").write_text(json.dumps(_edit_claims(edit)))
    with pytest.raises(PipelineError) as info:
        build(run_root)
    assert str(info.value).startswith("metrics/claims.json: ") and expected in str(info.value)
    assert "\n" not in str(info.value)
    assert not (run_root / "report/report.pdf").exists()


@pytest.mark.parametrize("edit,expected", [
    (lambda d: d["spread"]["metrics/pretrain/curated.json"]["seeds.ppl_mean"].pop("mean"),
     "key 'spread.metrics/pretrain/curated.json.seeds.ppl_mean.mean' is None"),
    (lambda d: d["spread"]["metrics/pretrain/curated.json"]["seeds.ppl_mean"].update(sd=float("inf")),
     "key 'spread.metrics/pretrain/curated.json.seeds.ppl_mean.sd' is inf"),
    (lambda d: d.update(source="curate_seeds"), "key 'source' is 'curate_seeds', an unknown source"),
])
def test_a_noise_file_with_a_missing_or_bad_field_is_one_line(run_root, edit, expected):
    (run_root / "metrics/noise").mkdir(parents=True)
    study = json.loads((FIXTURES / "noise_study/reseed.json").read_text())
    edit(study)
    (run_root / "metrics/noise/reseed.json").write_text(json.dumps(study))
    with pytest.raises(PipelineError) as info:
        build(run_root)
    assert str(info.value).startswith("metrics/noise/reseed.json: ") and expected in str(info.value)
    assert not (run_root / "report/report.pdf").exists() and not (run_root / "metrics/summary.json").exists()


def test_a_bad_noise_file_is_one_line_naming_the_key(run_root):
    (run_root / "metrics/noise").mkdir(parents=True)
    study = json.loads((FIXTURES / "noise_study/reseed.json").read_text())
    study["spread"]["metrics/pretrain/curated.json"]["seeds.ppl_mean"]["n"] = 1
    (run_root / "metrics/noise/reseed.json").write_text(json.dumps(study))
    with pytest.raises(PipelineError) as info:
        build(run_root)
    assert "metrics/noise/reseed.json: key 'spread.metrics/pretrain/curated.json.seeds.ppl_mean.n' is 1" in str(info.value)


def test_page_one_names_the_code_and_lock_by_content_and_the_date_is_not_the_clock(run_root, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    meta = run_meta(run_root, run_root / "params.yaml")
    assert meta.date.startswith("2026-01-01 00:00") and meta.revision.startswith(("sha256:", "unlocked"))
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    meta = run_meta(run_root, run_root / "params.yaml")
    assert "SOURCE_DATE_EPOCH" in meta.date and meta.commit.startswith(("sha256:", "unlocked", "no code"))
    assert run_meta(run_root, run_root / "params.yaml") == meta   # content, not a clock or a commit


def test_the_same_inputs_give_the_same_pdf(run_root, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    build(run_root)
    first = (run_root / "report/report.pdf").read_bytes()
    build(run_root)
    assert (run_root / "report/report.pdf").read_bytes() == first


# ---------------------------------------------------------------- the layout checker itself
def _fig() -> tuple[Figure, object]:
    fig = Figure(figsize=(4, 3), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots()


def test_checker_finds_overlapping_labels_a_covering_legend_and_a_struck_label():
    fig, ax = _fig()
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 0.5, "first label")
    ax.text(0.52, 0.5, "second label")
    assert any("overlaps" in p for p in figure_problems(fig))

    fig, ax = _fig()
    ax.bar([0, 1, 2], [1, 1, 1], label="bars")
    ax.legend(loc="center")
    assert any("legend covers bars" in p for p in figure_problems(fig))

    fig, ax = _fig()
    ax.bar([0], [0.5])
    ax.axhline(0.5)
    ax.annotate("0.50", (0, 0.5), ha="center", va="center")
    assert any("struck through" in p for p in figure_problems(fig))

    fig, ax = _fig()
    ax.text(0.98, 0.5, "a label running off the right edge", transform=fig.transFigure)
    assert any("cut off" in p for p in figure_problems(fig))


def test_checker_passes_a_clean_figure():
    fig, ax = _fig()
    ax.bar([0, 1], [0.3, 0.6], label="bars")
    ax.annotate("0.30", (0, 0.3), textcoords="offset points", xytext=(0, 3), ha="center")
    ax.set(title="clean", xlabel="x", ylabel="y", ylim=(0, 1))
    ax.legend(loc="upper left")
    assert figure_problems(fig) == []

"""The report's page checker finds the figure defects issue 54 listed, on the old figures drawn from the
committed metrics, and passes the figures as they are drawn now.

Why each old drawing is repeated here: the defects were in the drawing code, now fixed; the checker is what
keeps them from coming back, so it must be seen to fail on exactly what a reader saw (page 4's touching
tick labels, Fig 7.2's "leads" on a tie, Fig 7.3's series hidden at 0). The DAG picture and the offline
plots page have theirs in tests/reporting/docs/test_dag.py and tests/reporting/review/test_plots_diff.py.
"""
from __future__ import annotations

from pathlib import Path

from decision_pipeline.reporting.layout import caption_problems, figure_problems
from decision_pipeline.reporting.report import figures as F
from decision_pipeline.reporting.report import figures_charter as C
from decision_pipeline.reporting.report.sections import charter_figs
from decision_pipeline.reporting.report.sources import Store

ROOT = Path(__file__).resolve().parents[3]
STORE = Store(ROOT)   # the committed metrics


def test_old_split_panel_tick_labels_collide_and_the_new_ones_do_not(tmp_path):
    panels = (("questions per split", "metrics/items.json", "splits", "split", "count (questions)"),
              ("questions per family", "metrics/items.json", "families", "family", "count (questions)"),
              ("documents per safety score", "metrics/ingest.json", "safety_scores", "safety score (0–5)",
               "count (documents)"))
    with F.figure(ncols=3) as (fig, axes):                       # the old Figure 1.1
        for i, (ax, (title, rel, key, xlabel, ylabel)) in enumerate(zip(axes[0], panels)):
            keys = list(STORE.mapping(rel, key))
            vals = [STORE.number(rel, f"{key}.{k}") for k in keys]
            F.bar_labels(ax, ax.bar(range(len(keys)), vals, color=F.color(i)), vals, ",.0f")
            ax.set_xticks(range(len(keys)), [k if len(k) <= 6 else k[:5] + "." for k in keys], fontsize=7)
            ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
            ax.margins(y=0.15)
        old = figure_problems(fig)
    assert any("tick labels 'bench' and 'calib.' collide" in p for p in old), old
    F.items_and_pool(STORE, tmp_path / "data_items.png")
    assert F.LAYOUT_PROBLEMS["data_items.png"] == []


def test_old_safety_lines_hide_a_series_and_the_new_grid_shows_every_candidate(tmp_path):
    names = C.candidates(STORE)
    with F.figure() as (fig, axes):                              # the old Figure 7.3
        ax = axes[0, 0]
        for i, c in enumerate(names):
            by = STORE.mapping(C.RANKING, f"rows.{c}.accept_rate_by_safety")
            scores = sorted(by, key=float)
            ax.plot([float(k) for k in scores], [by[k] for k in scores], "-o", ms=4, lw=2.5 - 0.4 * i, label=c)
        old = figure_problems(fig)
    assert "series 'ref_summarise' is hidden under 'small_base'" in " ".join(old), old
    C.robustness_by_safety(STORE, tmp_path / "charter_safety.png")
    assert F.LAYOUT_PROBLEMS["charter_safety.png"] == []


def test_a_caption_that_says_leads_on_a_tie_is_found(tmp_path):
    C.quality_by_dimension(STORE, tmp_path / "charter_dimensions.png")
    bars = F.BAR_VALUES["charter_dimensions.png"]
    assert bars["ref_cite_right"]["relevance"] == bars["ref_follows_prompt"]["relevance"]   # the committed tie
    old = ("Rubric means per dimension (1-5) over the seed documents; ref_cite_right leads on charter grounding, "
           "relevance, voice tone. One judge pass per repeat, deterministic rules here (spread 0).")
    found = caption_problems(old, bars)
    assert [p.split("'")[1] for p in found] == ["relevance", "voice tone"], found
    new = next(f for f in charter_figs(STORE) if f.id == "charter_dimensions").caption
    assert "ref_cite_right leads on charter grounding; it ties for the top on relevance and voice tone" in new
    assert caption_problems(new, bars) == []


def test_hidden_series_rule_by_hand():
    def problems(under: dict, over: dict, shift: float = 0.0) -> list[str]:
        with F.figure() as (fig, axes):
            ax = axes[0, 0]
            ax.plot([0, 1, 2], [0, 0, 0.5], label="under", **under)
            ax.plot([0, 1, 2], [0 + shift, 0, 0.5], label="over", **over)
            ax.set_ylim(-1, 1)
            return [p for p in figure_problems(fig) if "hidden" in p]

    same = {"marker": "o", "ms": 4, "lw": 1.3}
    assert problems(same, {**same, "lw": 0.9}) == ["figure: series 'under' is hidden under 'over'"]
    assert problems({**same, "lw": 3.0}, same) == []                    # a 1.7 pt wider rim shows
    assert problems({"marker": "o", "ms": 7, "lw": 1}, {"lw": 1}) == []  # its markers stick out
    assert problems({"lw": 1}, {"marker": "o", "ms": 4, "ls": "none"}) == []   # markers only on top: the line shows
    assert problems(same, same, shift=0.2) == []                         # different points

"""Annotation-model selection figures, redrawn by the report from the charter metrics.

Why redraw instead of embedding the charter stage's PNGs: those place candidate
names as free point labels (four names at one point print over each other) and
legends over bars, and the report's layout checks cannot see inside an embedded
image. These read `metrics/charter/ranking.json` and `judge_agreement.json` only.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from decision_pipeline.reporting import style
from decision_pipeline.reporting.report.figures import color, figure, legend_outside, save
from decision_pipeline.reporting.report.sources import Store

RANKING, AGREEMENT = "metrics/charter/ranking.json", "metrics/charter/judge_agreement.json"
THROUGHPUT = "metrics/charter/throughput"


def candidates(store: Store) -> list[str]:
    """Candidates in ranking order (the ranking's `order`, then any other row by name)."""
    rows = store.mapping(RANKING, "rows")
    order = [c for c in store.raw(RANKING, "order") if c in rows] if store.has(RANKING, "order") else []
    return order + sorted(c for c in rows if c not in order)


def has_charter_rows(store: Store) -> bool:
    return store.has(RANKING, "rows") and bool(store.raw(RANKING, "rows"))


def _spread_labels(ys: list[float], gap: float) -> list[float]:
    """Label heights as close to `ys` as possible but at least `gap` apart (sorted sweep, then recentred)."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed: list[float] = []
    for i in order:
        placed.append(max(ys[i], placed[-1] + gap) if placed else ys[i])
    shift = (sum(placed) - sum(ys[i] for i in order)) / max(len(placed), 1)
    out = [0.0] * len(ys)
    for i, y in zip(order, placed):
        out[i] = y - shift
    return out


def cost_vs_quality(store: Store, out: Path) -> Path:
    """Accept rate vs extrapolated GPU-hours; names in a column beside the points with leader lines."""
    names = candidates(store)
    rows = store.mapping(RANKING, "rows")
    acc = [store.number(RANKING, f"rows.{c}.accept_rate") for c in names]
    hours = [store.number(RANKING, f"rows.{c}.gpu_hours", nullable=True) for c in names]
    budget = next((store.number(f"{THROUGHPUT}/{c}.json", "budget_gpu_hours") for c in names
                   if store.has(f"{THROUGHPUT}/{c}.json", "budget_gpu_hours")), None)
    xs = [0.0 if h is None else h for h in hours]
    xmax = max(xs + ([budget] if budget else [])) or 1.0
    with figure(ncols=2, gridspec_kw={"width_ratios": [3, 1.4]}) as (fig, axes):
        ax, lab = axes[0, 0], axes[0, 1]
        for i, (c, x, y, h) in enumerate(zip(names, xs, acc, hours)):
            ax.plot([x], [y], "s" if h is None else "o", color=color(i), ms=7)
        if budget:
            ax.axvline(budget, color="0.4", ls="--", lw=1, label=f"budget {budget:,.0f} GPU-h")
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False, fontsize=7)
        ax.set(xlim=(-0.05 * xmax, 1.08 * xmax), ylim=(-0.05, 1.05), xlabel="extrapolated GPU-hours (workload)",
               ylabel="judge accept rate", title="Cost vs quality")
        ys = _spread_labels(acc, 0.11)
        lab.set(xlim=(0, 1), ylim=(-0.05, 1.05))
        lab.axis("off")
        for i, (c, y, ly, h) in enumerate(zip(names, acc, ys, hours)):
            kind = rows[c].get("kind", "")
            note = "rule, no GPU" if h is None else f"{h:,.0f} GPU-h"
            lab.text(0.08, ly, f"{c}\n{y:.2f} accepted; {note}" + (" (ref.)" if kind == "reference" else ""),
                     va="center", fontsize=7, color=color(i))
            lab.plot([0, 0.06], [y, ly], color=color(i), lw=0.8, clip_on=False)
        return save(fig, out)


def quality_by_dimension(store: Store, out: Path) -> Path:
    names = candidates(store)
    dims = sorted(set().union(*(store.mapping(RANKING, f"rows.{c}.dimension_means") for c in names)))
    width = 0.8 / len(names)
    with figure() as (fig, axes):
        ax = axes[0, 0]
        for i, c in enumerate(names):
            vals = [store.number(RANKING, f"rows.{c}.dimension_means.{d}") for d in dims]
            ax.bar(np.arange(len(dims)) + (i - (len(names) - 1) / 2) * width, vals, width * 0.9,
                   color=color(i), label=c)
        ax.set_xticks(np.arange(len(dims)), [d.replace("_", " ") for d in dims])
        ax.set(ylim=(0, 5.3), ylabel="mean rubric score (1-5)", title="Judge's rubric score per dimension")
        legend_outside(fig, ax, title="candidate")
        return save(fig, out)


def robustness_by_safety(store: Store, out: Path) -> Path:
    """Accept rate per candidate (rows) and document safety score (columns), each cell labelled.

    A grid, not lines: several candidates share whole curves (two at 0 everywhere), and a line drawn over
    another through the same points hid a series the legend listed (issue 54)."""
    names = candidates(store)
    scores = sorted(set().union(*(store.mapping(RANKING, f"rows.{c}.accept_rate_by_safety") for c in names)), key=float)
    grid = np.full((len(names), len(scores)), np.nan)
    for i, c in enumerate(names):
        by = store.mapping(RANKING, f"rows.{c}.accept_rate_by_safety")
        for j, k in enumerate(scores):
            if k in by:
                grid[i, j] = store.number(RANKING, f"rows.{c}.accept_rate_by_safety.{k}")
    cmap = matplotlib.colormaps[style.HEATMAP].with_extremes(bad=style.EMPTY_CELL)
    with figure(height=0.45 * len(names) + 1.3) as (fig, axes):
        ax = axes[0, 0]
        im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
        for (i, j), v in np.ndenumerate(grid):
            ax.text(j, i, "—" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if np.isnan(v) or v > 0.6 else "white")
        ax.set_xticks(range(len(scores)), scores)
        ax.set_yticks(range(len(names)), names)
        ax.grid(False)
        ax.set(xlabel="document safety score (0 benign - 5 most unsafe)",
               title="Judge accept rate by the document's safety score")
        fig.colorbar(im, ax=ax, label="accept rate", shrink=0.9)
        return save(fig, out)


def judge_confusion(store: Store, out: Path) -> Path:
    """Judge vs the reviews on the validation split: the 2x2 counts behind kappa."""
    conf = store.mapping(AGREEMENT, "confusion")
    labels = ("accept", "reject")
    grid = np.array([[store.number(AGREEMENT, f"confusion.{j}.{h}") for h in labels] for j in labels])
    with figure(height=3.0) as (fig, axes):
        ax = axes[0, 0]
        ax.imshow(grid, cmap="Blues", vmin=0, vmax=max(grid.max(), 1))
        for (a, b), v in np.ndenumerate(grid):
            ax.text(b, a, f"{v:.0f}", ha="center", va="center", fontsize=10,
                    color="white" if v > grid.max() / 2 else "black")
        ax.set_xticks(range(2), [f"review: {h}" for h in labels])
        ax.set_yticks(range(2), [f"judge: {j}" for j in labels])
        ax.grid(False)
        k = store.number(AGREEMENT, "kappa", nullable=True)
        ax.set_title(f"Judge vs reviews, validation split (n = {grid.sum():.0f})"
                     + (f": kappa {k:.2f}" if k is not None else "") + f"; rows: {', '.join(conf)}", fontsize=9)
        return save(fig, out)

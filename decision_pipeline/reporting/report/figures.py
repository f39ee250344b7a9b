"""The report's figures: what every report figure module shares (the styled figure, the PNG writer
with its layout check, model discovery) and the data and curation figures.

Each builder takes the `Store` and an output path, reads what it needs through the store (so bad
input names file and key) and writes one PNG atomically; drawn from tracked metrics and plot data
only (no model loading). The look (sizes that fit half a report page, the Okabe-Ito colour-blind-safe
palette, viridis for heatmaps) is the report's family in `reporting/style.py`; axis labels carry units.
"""
from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from decision_pipeline.common.io import write_bytes_atomic
from decision_pipeline.reporting import style
from decision_pipeline.reporting.report.sources import Store

MODEL_ORDER = ("base", "sft", "rl")


def color(i: int) -> str:
    return style.OKABE_ITO[i % len(style.OKABE_ITO)]


def models_in(store: Store, pattern: str) -> list[str]:
    """Model names with a file matching `pattern` ('{}' is the model), pipeline order first."""
    prefix, suffix = pattern.split("{}")
    found = [p[len(prefix):-len(suffix) if suffix else None] for p in store.glob(pattern.replace("{}", "*"))]
    found = [m for m in found if "/" not in m]
    return sorted(found, key=lambda m: (MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER), m))


@contextmanager
def figure(ncols: int = 1, nrows: int = 1, height: float = style.REPORT_HEIGHT,
           **kw) -> Iterator[tuple[Figure, np.ndarray]]:
    """A styled figure with an Agg canvas (no pyplot state) and a 2-D array of axes."""
    with matplotlib.rc_context(style.REPORT_RC):
        fig = style.agg_figure((style.REPORT_WIDTH, height), style.DPI, layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
        yield fig, axes


# Layout defects found while saving (figure_problems), per PNG name: the build logs them, the tests require none.
LAYOUT_PROBLEMS: dict[str, list[str]] = {}
# The drawn bar groups per PNG name ({series: {category: height}}): the build reads each caption's claims against them.
BAR_VALUES: dict[str, dict[str, dict[str, float]]] = {}
TASK_NAMES = {"noul": "yes/no"}      # display names of internal task keys (noul: "does a word occur in a list?")


def task_name(key: str) -> str:
    return TASK_NAMES.get(key, key)


def legend_outside(fig: Figure, ax, title: str | None = None, where: str = "right", **kw) -> None:
    """One legend beside (or below) the plot, never over bars or lines (constrained layout makes room)."""
    handles, labels = ax.get_legend_handles_labels()
    loc = "outside right upper" if where == "right" else "outside lower center"
    fig.legend(handles, labels, loc=loc, title=title, frameon=False,
               ncols=kw.pop("ncols", 1 if where == "right" else max(1, min(len(labels), 3))), **kw)


def save(fig: Figure, path: Path) -> Path:
    """PNG as RGB without alpha (half the bytes in the PDF, no soft mask) and without a version stamp.

    The drawn figure is checked for layout defects first (text cut off or overlapping, a legend over
    the data, a label struck through by a reference line); they are kept in LAYOUT_PROBLEMS.
    """
    from PIL import Image

    from decision_pipeline.reporting.layout import bar_table, figure_problems

    LAYOUT_PROBLEMS[Path(path).name] = figure_problems(fig)
    BAR_VALUES[Path(path).name] = bar_table(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=style.DPI, facecolor=style.BACKGROUND)
    buf.seek(0)
    out = io.BytesIO()
    with Image.open(buf) as img:
        img.convert("RGB").save(out, format="PNG", optimize=True)
    write_bytes_atomic(path, out.getvalue())
    return path


def bar_labels(ax, bars, values: Sequence[float], spec: str) -> None:
    ax.bar_label(bars, labels=[format(v, spec) for v in values], padding=2, fontsize=7)


# ------------------------------------------------------------------ data
def items_and_pool(store: Store, out: Path) -> Path:
    panels = (("questions per split", "metrics/items.json", "splits", "split", "count (questions)"),
              ("questions per family", "metrics/items.json", "families", "family", "count (questions)"),
              ("documents per safety score", "metrics/ingest.json", "safety_scores", "safety score (0–5)",
               "count (documents)"))
    with figure(ncols=3) as (fig, axes):
        for i, (ax, (title, rel, key, xlabel, ylabel)) in enumerate(zip(axes[0], panels)):
            keys = list(store.mapping(rel, key))
            vals = [store.number(rel, f"{key}.{k}") for k in keys]
            bars = ax.bar(range(len(keys)), vals, color=color(i))
            bar_labels(ax, bars, vals, ",.0f")
            # whole names, slanted: six splits abbreviated side by side touched ('benchcalib.', issue 54)
            words = any(not k.isdigit() for k in keys)
            ax.set_xticks(range(len(keys)), keys, fontsize=7, rotation=30 if words else 0, ha="right" if words else "center",
                          rotation_mode="anchor")
            ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
            ax.margins(y=0.15)
        return save(fig, out)


# ------------------------------------------------------------- curation
ARMS = ("curated", "filtered_random", "random")


def ppl_by_register(store: Store, out: Path) -> Path:
    """Left: each arm's mean held-out ppl over seeds with the seed range (the headline numbers).
    Right: per register, the seed-0 model (the only seed with per-register values)."""
    rels = {a: f"metrics/pretrain/{a}.json" for a in ARMS}
    regs = sorted(store.mapping(rels["curated"], "heldout.registers"))
    n = int(store.number(rels["curated"], "seeds.n"))
    with figure(ncols=2, gridspec_kw={"width_ratios": [1, 3]}) as (fig, axes):
        ax = axes[0, 0]
        for i, (arm, rel) in enumerate(rels.items()):
            mean = store.number(rel, "seeds.ppl_mean")
            lo, hi = store.number(rel, "seeds.ppl_min"), store.number(rel, "seeds.ppl_max")
            ax.bar(i, mean, 0.7, color=color(i), label=arm)
            ax.errorbar([i], [mean], yerr=[[mean - lo], [hi - mean]], fmt="none", ecolor="black", capsize=3)
            ax.annotate(f"{mean:.2f}", (i, hi), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
        ax.set_xticks(range(len(ARMS)), ["cur.", "f_rnd", "rnd"])
        ax.set(ylabel="held-out perplexity (lower is better)", title=f"mean of {n} seeds (bars: min\u2013max)")
        ax.margins(y=0.15)
        ax = axes[0, 1]
        x = np.arange(len(regs))
        width = 0.8 / len(ARMS)
        for i, (arm, rel) in enumerate(rels.items()):
            vals = [store.number(rel, f"heldout.registers.{r}.ppl") for r in regs]
            bars = ax.bar(x + (i - (len(ARMS) - 1) / 2) * width, vals, width, color=color(i))
            bar_labels(ax, bars, vals, ".1f")
        ax.set_xticks(x, regs)
        ax.set(xlabel="held-out register", title="per register, seed-0 model only (no spread recorded)")
        ax.margins(y=0.12)
        legend_outside(fig, axes[0, 0], where="below")
        return save(fig, out)


def pretrain_loss(store: Store, out: Path) -> Path:
    with figure() as (fig, axes):
        ax = axes[0, 0]
        for i, name in enumerate(ARMS):
            rows = store.rows(f"plots/pretrain/{name}_loss.json", ("step", "loss"))
            ax.plot([r["step"] for r in rows], [r["loss"] for r in rows], color=color(i), lw=1.5, label=name)
        ax.set(xlabel="optimizer step", ylabel="training loss (nats/token)",
               title="Pretraining loss on each arm's own data (seed 0)")
        legend_outside(fig, ax)
        return save(fig, out)


def curation_funnel(store: Store, out: Path) -> Path:
    rel = "metrics/curate/curated.json"
    drops = store.mapping(rel, "drops")
    names = ["held-out question"] + sorted(drops) + ["near-duplicate"]
    vals = ([store.number(rel, "decontamination.removed_docs")] + [store.number(rel, f"drops.{k}") for k in sorted(drops)]
            + [store.number(rel, "dedup.removed")])
    with figure() as (fig, axes):
        ax = axes[0, 0]
        bars = ax.barh(names[::-1], vals[::-1], color=color(5))
        bar_labels(ax, bars, vals[::-1], ",.0f")
        ax.set(xlabel="documents dropped (count)", ylabel="reason",
               title=f"Documents dropped before selection (pool {store.number(rel, 'pool_docs'):,.0f}, "
                     f"after filters {store.number(rel, 'after_filters'):,.0f})")
        ax.margins(x=0.12)
        return save(fig, out)


def register_mix(store: Store, out: Path) -> Path:
    sels = tuple(a for a in ARMS if store.has(f"metrics/curate/{a}.json", "register_mix"))
    regs = sorted(set().union(*(store.mapping(f"metrics/curate/{s}.json", "register_mix") for s in sels)))
    with figure() as (fig, axes):
        ax = axes[0, 0]
        for j, s in enumerate(sels):
            rel = f"metrics/curate/{s}.json"
            toks = [store.number(rel, f"register_mix.{g}.tokens") if store.has(rel, f"register_mix.{g}") else 0.0
                    for g in regs]
            total = sum(toks) or 1.0
            left = 0.0
            for i, (g, t) in enumerate(zip(regs, toks)):
                share = 100 * t / total
                ax.barh(j, share, left=left, color=color(i), label=g if j == 0 else None)
                if share >= 6:
                    ax.text(left + share / 2, j, f"{share:.0f}%", ha="center", va="center", fontsize=7, color="white")
                left += share
        ax.set_yticks(range(len(sels)), sels)
        ax.set(xlabel="share of selected tokens (%)", ylabel="selection", xlim=(0, 100), title="Register mix of the selections")
        legend_outside(fig, ax, where="below", ncols=len(regs))
        return save(fig, out)


def placeholder(out: Path, message: str) -> Path:
    """A figure whose metrics are missing: a marked empty panel naming the file and key, not a crash."""
    import textwrap

    with figure(height=1.6) as (fig, axes):
        ax = axes[0, 0]
        ax.set_axis_off()
        ax.text(0.5, 0.5, "Figure not drawn: its metrics are missing\n" + textwrap.fill(message, 110),
                ha="center", va="center", fontsize=8, color="#8b0000", transform=ax.transAxes)
        return save(fig, out)

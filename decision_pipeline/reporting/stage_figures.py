"""The figures the stages draw beside their metrics (evaluate, sft, rl, cross_route): routing curves,
reliability, accuracy grids, loss curves, RL rounds, as PNGs.

Figures are built as bare `matplotlib.figure.Figure` objects rendered by the
Agg canvas, never through pyplot, so nothing depends on a display or on global
pyplot state and stages may plot from worker processes (the stages' family in
`reporting/style.py`). Each file is written atomically (temp file in the same
directory, then os.replace), so a crashed or concurrent run never leaves a
half-written PNG that DVC would cache.
"""
from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from decision_pipeline.common.io import atomic_file
from decision_pipeline.reporting import style


def _styled(fn: Callable[..., Path]) -> Callable[..., Path]:
    """Apply the report font sizes while a figure is built and drawn (rc is read at artist creation)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Path:
        with matplotlib.rc_context(style.STAGE_RC):
            return fn(*args, **kwargs)
    return wrapper


def _figure(width: float, height: float, layout: str = "tight", **subplot_kw: Any) -> tuple[Figure, Any]:
    fig = style.agg_figure((width, height), style.STAGE_DPI, layout=layout)
    return fig, fig.subplots(**subplot_kw)


def _save(fig: Figure, path: str | os.PathLike) -> Path:
    """Write through common.io.atomic_file (whole or untouched); layout runs at draw."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=style.STAGE_DPI)
    return path


def _nonempty(mapping: Mapping, name: str) -> None:
    if not mapping:
        raise ValueError(f"{name} is empty; nothing to plot")


# ----------------------------------------------------------------- routing
@_styled
def plot_routing_curve(curves: Mapping[str, Sequence[dict]], path: str | os.PathLike,
                       title: str = "Routing low-margin readouts to thinking") -> Path:
    """Accuracy (top) and mean thinking tokens per item (bottom) vs routed fraction.

    Dashed lines mark each model's readout-only and thinking-only accuracy, so
    the eye reads how much of the gap a cheap routing share recovers.
    Rows are `metrics.routing_curve` output.
    """
    _nonempty(curves, "curves")
    fig, (ax, ax_tok) = _figure(8, 7, nrows=2, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    for color, (name, rows) in zip(style.tab10(len(curves)), curves.items()):
        rows = sorted(rows, key=lambda r: r["fraction"])
        x = [r["fraction"] for r in rows]
        ax.plot(x, [r["accuracy"] for r in rows], "-o", color=color, ms=4, lw=2, label=f"{name}: routed")
        if rows and rows[0].get("readout_accuracy") is not None:
            ax.axhline(rows[0]["readout_accuracy"], color=color, ls=(0, (5, 3)), lw=1.2, alpha=0.8,
                       label=f"{name}: readout only")
        if rows and rows[0].get("thinking_accuracy") is not None:
            ax.axhline(rows[0]["thinking_accuracy"], color=color, ls=(0, (2, 2)), lw=1.2, alpha=0.8,
                       label=f"{name}: thinking only")
        ax_tok.plot(x, [r["mean_thinking_tokens"] for r in rows], "-s", color=color, ms=3, lw=1.8, label=name)
    ax.set(title=title, ylabel="accuracy")
    ax.grid(alpha=style.GRID_ALPHA)
    ax.legend(loc="best", ncol=1 if len(curves) < 3 else 2)
    ax_tok.set(xlabel="fraction of items routed to thinking (lowest readout margin first)",
               ylabel="mean thinking\ntokens / item")
    ax_tok.set_xlim(0, 1)
    ax_tok.grid(alpha=style.GRID_ALPHA)
    return _save(fig, path)


@_styled
def plot_cross_routing(pairs: Mapping[str, Mapping[str, Any]], path: str | os.PathLike) -> Path:
    """One panel per readout model: accuracy vs routed share with each model's thinking.

    Why panels: the question is "whose thinking should this model's doubtful readouts go
    to?", so the curves to compare share a readout model. `pairs` is cross_routing.all_pairs
    output (each with readout_model, thinking_model and curve).
    """
    _nonempty(pairs, "pairs")
    readers = list(dict.fromkeys(p["readout_model"] for p in pairs.values()))
    thinkers = list(dict.fromkeys(p["thinking_model"] for p in pairs.values()))
    colors = dict(zip(thinkers, style.tab10(len(thinkers))))
    fig, axes = _figure(4.2 * len(readers), 4.2, nrows=1, ncols=len(readers), sharey=True, squeeze=False)
    for ax, reader in zip(axes[0], readers):
        for p in (p for p in pairs.values() if p["readout_model"] == reader):
            rows = sorted(p["curve"], key=lambda r: r["fraction"])
            same = p["thinking_model"] == reader
            ax.plot([r["fraction"] for r in rows], [r["accuracy"] for r in rows], "-o" if same else "-s",
                    ms=3, lw=2.2 if same else 1.6, color=colors[p["thinking_model"]],
                    label=f"thinking: {p['thinking_model']}" + (" (same model)" if same else ""))
        ax.set(title=f"readout: {reader}", xlabel="share routed (lowest margin first)", xlim=(0, 1))
        ax.grid(alpha=style.GRID_ALPHA)
        ax.legend(loc="best")
    axes[0][0].set_ylabel("accuracy")
    return _save(fig, path)


# ------------------------------------------------------------- reliability
def _bins_dict(b: Any) -> dict:
    return b.to_dict() if hasattr(b, "to_dict") else dict(b)


def _floats(values: Sequence) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


@_styled
def plot_reliability(bins_by_model: Mapping[str, Any], path: str | os.PathLike,
                     title: str = "Readout reliability") -> Path:
    """Reliability diagram (accuracy vs mean confidence, diagonal = calibrated) over a count histogram.

    Accepts `stats.ReliabilityBins` or its `to_dict()` form; empty bins are skipped.
    """
    _nonempty(bins_by_model, "bins_by_model")
    fig, (ax, ax_hist) = _figure(7, 7.5, nrows=2, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
    k = len(bins_by_model)
    for j, (color, (name, b)) in enumerate(zip(style.tab10(k), bins_by_model.items())):
        d = _bins_dict(b)
        edges, counts = np.asarray(d["edges"], dtype=float), np.asarray(d["count"], dtype=float)
        conf, acc = _floats(d["mean_confidence"]), _floats(d["accuracy"])
        ok = (counts > 0) & np.isfinite(conf) & np.isfinite(acc)
        ax.plot(conf[ok], acc[ok], "-o", color=color, lw=2, ms=5, label=f"{name} (n={int(counts.sum())})")
        width = np.diff(edges) / k
        ax_hist.bar(edges[:-1] + j * width, counts, width=width, align="edge", color=color, alpha=0.8, label=name)
    ax.set(title=title, ylabel="accuracy in bin", xlim=(0, 1), ylim=(0, 1))
    ax.set_aspect("auto")
    ax.grid(alpha=style.GRID_ALPHA)
    ax.legend(loc="upper left")
    ax_hist.set(xlabel="confidence (max option probability)", ylabel="items")
    ax_hist.grid(alpha=style.GRID_ALPHA, axis="y")
    return _save(fig, path)


# -------------------------------------------------------------------- grid
_GRID_KEYS = (("readout_accuracy", "readout"), ("thinking_accuracy", "thinking"), ("accuracy", "accuracy"))


@_styled
def plot_accuracy_grid(grid_rows: Sequence[dict], path: str | os.PathLike,
                       title: str = "Accuracy by family and level") -> Path:
    """Family x level heatmap(s) with each cell's accuracy (and n) written in it.

    Rows are `metrics.accuracy_grid` output (one panel each for readout and
    thinking) or a plain per-(family, level) `accuracy` list (one `accuracy` panel).
    Empty cells are left blank.
    """
    if not grid_rows:
        raise ValueError("grid_rows is empty; nothing to plot")
    keys = [(k, label) for k, label in _GRID_KEYS if any(k in r for r in grid_rows)]
    if not keys:
        raise ValueError("grid rows need 'readout_accuracy', 'thinking_accuracy' or 'accuracy'")
    families = sorted({str(r["family"]) for r in grid_rows})
    levels = sorted({int(r["level"]) for r in grid_rows})
    fig, axes = _figure(2.8 + 1.1 * len(levels) * len(keys), 1.6 + 0.7 * len(families),
                        layout="constrained", ncols=len(keys), squeeze=False)
    image = None
    for ax, (key, label) in zip(axes[0], keys):
        grid = np.full((len(families), len(levels)), np.nan)
        counts = np.zeros_like(grid, dtype=int)
        for r in grid_rows:
            i, j = families.index(str(r["family"])), levels.index(int(r["level"]))
            if r.get(key) is not None:
                grid[i, j], counts[i, j] = float(r[key]), int(r.get("n", 0))
        ax.set_facecolor(style.EMPTY_CELL)  # empty cells show as grey, not as a colour that reads as a value
        image = ax.imshow(np.ma.masked_invalid(grid), vmin=0, vmax=1, cmap=style.HEATMAP, aspect="auto")
        for i, j in np.ndindex(grid.shape):
            if not math.isnan(grid[i, j]):
                text = f"{grid[i, j]:.2f}" + (f"\nn={counts[i, j]}" if counts[i, j] else "")
                ax.text(j, i, text, ha="center", va="center", fontsize=9,
                        color="black" if grid[i, j] > 0.6 else "white")
        ax.set_xticks(range(len(levels)), [str(v) for v in levels])
        ax.set_yticks(range(len(families)), families)
        ax.set(xlabel="level", title=label)
    axes[0][0].set_ylabel("family")
    fig.suptitle(title)
    fig.colorbar(image, ax=list(axes[0]), label="accuracy", fraction=0.05, pad=0.02)
    return _save(fig, path)


# -------------------------------------------------------------------- loss
@_styled
def plot_loss_curves(series: Mapping[str, Sequence[dict]], path: str | os.PathLike,
                     title: str = "Training loss") -> Path:
    """Loss vs step per run; log y-axis when losses span more than 20x so late progress stays visible."""
    _nonempty(series, "series")
    fig, ax = _figure(8, 5)
    lows, highs = [], []
    for color, (name, points) in zip(style.tab10(len(series)), series.items()):
        pts = sorted(points, key=lambda p: p["step"])
        steps = [p["step"] for p in pts]
        losses = np.array([p["loss"] for p in pts], dtype=float)
        ax.plot(steps, losses, "-", color=color, lw=1.8, label=name, marker="o" if len(pts) < 30 else None, ms=3)
        finite = losses[np.isfinite(losses)]
        if finite.size:
            lows.append(finite.min())
            highs.append(finite.max())
    if lows and min(lows) > 0 and max(highs) / min(lows) > 20:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))  # "0.2", not "2x10^-1"
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set(title=title, xlabel="step", ylabel="loss")
    ax.grid(alpha=style.GRID_ALPHA, which="both")
    ax.legend(loc="best")
    return _save(fig, path)


# --------------------------------------------------------------------- RL
RL_PANELS = (("reward", "mean total reward per chain", ("correctness_mean", "unfinished_mean", "length_mean")),
             ("unfinished_share", "share of chains open at the token cap", ()),
             ("mean_completion_tokens", "mean completion tokens", ()),
             ("mixed_group_share", "share of groups with right and wrong chains", ("chain_accuracy",)))


@_styled
def plot_rl_rounds(rows: Sequence[dict], path: str | os.PathLike, title: str = "GRPO per round") -> Path:
    """Four panels over RL rounds: total reward (with its parts), unfinished share, length, mixed groups."""
    if not rows:
        raise ValueError("rows is empty; nothing to plot")
    fig, axes = _figure(11, 7, nrows=2, ncols=2)
    steps = [r["step"] for r in rows]
    for ax, (key, label, extra) in zip(axes.flat, RL_PANELS):
        for color, name in zip(style.tab10(1 + len(extra)), (key, *extra)):
            values = [np.nan if r.get(name) is None else r[name] for r in rows]
            if not np.isfinite(np.asarray(values, dtype=float)).any():
                continue
            ax.plot(steps, values, "-o" if len(rows) < 30 else "-", color=color, lw=1.8 if name == key else 1.0,
                    ms=3, label=name.replace("_", " "))
        ax.set(title=label, xlabel="optimizer step at generation")
        ax.grid(alpha=style.GRID_ALPHA)
        if extra:
            ax.legend(loc="best")
    fig.suptitle(title)
    return _save(fig, path)

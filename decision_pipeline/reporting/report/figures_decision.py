"""Decision-model and S1MB figures for the report (same style as `figures.py`).

Models are discovered from the tracked files (`metrics/evaluate/<model>.json`,
`metrics/s1mb/<model>.json`), so an `evaluate@rl` or `s1mb@rl` that lands later
appears in these figures without an edit here.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from decision_pipeline.reporting import style
from decision_pipeline.reporting.report.figures import (bar_labels, color, figure, legend_outside, models_in, save,
                                                        task_name)
from decision_pipeline.reporting.report.sources import Store

EVAL = "metrics/evaluate/{}.json"
MEASURES = (("readout", "readout_accuracy"), ("thinking", "thinking_accuracy"),
            ("post-chain readout", "post_chain_accuracy"), ("30% routed to thinking", "routed_accuracy_at_0.3"))


def eval_models(store: Store) -> list[str]:
    return models_in(store, EVAL)


def accuracy_cis(store: Store, out: Path) -> Path:
    models = eval_models(store)
    width = 0.8 / len(models)
    with figure() as (fig, axes):
        ax = axes[0, 0]
        for j, m in enumerate(models):
            rel = EVAL.format(m)
            pts = [(store.number(rel, f"cis.{k}.point"), store.number(rel, f"cis.{k}.ci_low"),
                    store.number(rel, f"cis.{k}.ci_high")) for _, k in MEASURES]
            x = np.arange(len(MEASURES)) + (j - (len(models) - 1) / 2) * width
            y = np.array([p[0] for p in pts])
            err = np.array([[p[0] - p[1] for p in pts], [p[2] - p[0] for p in pts]])
            bars = ax.bar(x, y, width * 0.9, yerr=err, capsize=3, color=color(j), label=m, error_kw={"lw": 1})
            bar_labels(ax, bars, y, ".2f")
        ax.set_xticks(np.arange(len(MEASURES)), [label for label, _ in MEASURES])
        ax.set(ylabel="accuracy on eval items (fraction)", ylim=(0, 1.05),
               title="Eval accuracy with 95% bootstrap CIs")
        legend_outside(fig, ax, title="model")
        return save(fig, out)


def accuracy_grid(store: Store, out: Path) -> Path:
    models = eval_models(store)
    panels = (("readout", "readout_accuracy"), ("thinking", "thinking_accuracy"))
    with figure(ncols=len(models), nrows=2, height=4.6) as (fig, axes):
        image = None
        for j, m in enumerate(models):
            rows = store.rows(f"plots/evaluate/{m}/accuracy_by_group.json", ("family", "level", "n"))
            fams = sorted({str(r["family"]) for r in rows})
            levels = sorted({int(r["level"]) for r in rows})
            for i, (label, key) in enumerate(panels):
                ax = axes[i, j]
                grid = np.full((len(fams), len(levels)), np.nan)
                for r in rows:
                    if r.get(key) is not None:
                        grid[fams.index(str(r["family"])), levels.index(int(r["level"]))] = float(r[key])
                ax.set_facecolor(style.EMPTY_CELL)
                image = ax.imshow(np.ma.masked_invalid(grid), vmin=0, vmax=1, cmap=style.HEATMAP, aspect="auto")
                for (a, b), v in np.ndenumerate(grid):
                    if np.isfinite(v):
                        ax.text(b, a, f"{v:.2f}", ha="center", va="center", fontsize=6.5,
                                color="black" if v > 0.6 else "white")
                ax.set_xticks(range(len(levels)), [str(v) for v in levels])
                ax.set_yticks(range(len(fams)), fams)
                ax.grid(False)
                ax.set_title(f"{m}: {label}")
                if i == 1:
                    ax.set_xlabel("difficulty level")
        fig.colorbar(image, ax=axes, label="accuracy (fraction)", fraction=0.04, pad=0.02)
        return save(fig, out)


def routing(store: Store, out: Path) -> Path:
    models = eval_models(store)
    with figure() as (fig, axes):
        ax = axes[0, 0]
        ax_tok = ax.twinx()
        for j, m in enumerate(models):
            rows = sorted(store.rows(f"plots/evaluate/{m}/routing.json", ("fraction", "accuracy", "mean_thinking_tokens")),
                          key=lambda r: r["fraction"])
            x = [100 * r["fraction"] for r in rows]
            ax.plot(x, [r["accuracy"] for r in rows], "-o", ms=3, color=color(j), label=f"{m}: accuracy")
            ax_tok.plot(x, [r["mean_thinking_tokens"] for r in rows], "--", color=color(j), alpha=0.7,
                        label=f"{m}: thinking tokens")
        ax.set(xlabel="share of eval items routed to thinking, lowest readout margin first (%)",
               ylabel="accuracy (fraction, solid)", title="Routing curve", xlim=(0, 100))
        ax_tok.set_ylabel("mean thinking tokens per item (dashed)")
        ax_tok.grid(False)
        ax_tok.spines["right"].set_visible(True)
        lines = ax.get_legend_handles_labels(), ax_tok.get_legend_handles_labels()
        fig.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], loc="outside lower center",
                   ncols=max(1, len(models)), fontsize=7, frameon=False)
        return save(fig, out)


def calibration(store: Store, out: Path) -> Path:
    models = eval_models(store)
    x = np.arange(len(models))
    with figure() as (fig, axes):
        ax = axes[0, 0]
        before = [store.number(EVAL.format(m), "readout_uncalibrated.ece") for m in models]
        after = [store.number(EVAL.format(m), "ece_calibrated") for m in models]
        floor = [store.number(EVAL.format(m), "ece_noise_floor.p95") for m in models]
        ax.bar(x - 0.2, before, 0.4, color=color(1), label="temperature 1")
        ax.bar(x + 0.2, after, 0.4, color=color(0), label="calibrated (kept temperatures)")
        ax.hlines(floor, x - 0.45, x + 0.45, colors="black", linestyles=":", lw=1.5,
                  label="noise floor: p95 ECE of a perfectly calibrated model")
        top = max(before + after + floor)
        for xs, vals in ((x - 0.2, before), (x + 0.2, after)):
            for xi, v, f in zip(xs, vals, floor):
                # a label sits above its bar, or above the floor line when the bar ends near it
                y = v if v > f + 0.04 * top else max(v, f)
                ax.annotate(f"{v:.3f}", (xi, y), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
        ax.set_xticks(x, models)
        ax.set(xlabel="model", ylabel="expected calibration error (fraction)",
               title="Readout calibration on eval items")
        ax.margins(y=0.15)
        legend_outside(fig, ax, where="below")
        return save(fig, out)


def _by_task(store: Store, m: str, key: str) -> tuple[list[str], list[float]]:
    rel = EVAL.format(m)
    tasks = sorted(store.mapping(rel, "by_task"))
    return tasks, [store.number(rel, f"by_task.{t}.{key}") for t in tasks]


def _grouped(ax, store: Store, models: list[str], key: str, spec: str) -> list[str]:
    width = 0.8 / len(models)
    tasks: list[str] = []
    for j, m in enumerate(models):
        tasks, vals = _by_task(store, m, key)
        bars = ax.bar(np.arange(len(tasks)) + (j - (len(models) - 1) / 2) * width, vals, width * 0.9,
                      color=color(j), label=m)
        bar_labels(ax, bars, vals, spec)
    ax.set_xticks(np.arange(len(tasks)), [task_name(t) for t in tasks])
    ax.margins(y=0.15)
    return tasks


def chain_lengths(store: Store, out: Path) -> Path:
    models = eval_models(store)
    with figure() as (fig, axes):
        ax = axes[0, 0]
        _grouped(ax, store, models, "median_chain_tokens", ".0f")
        ax.set(xlabel="task", ylabel="median thinking-chain length (tokens)",
               title="Chain length on eval items (median per task)")
        legend_outside(fig, ax, title="model")
        return save(fig, out)


def unfinished(store: Store, out: Path) -> Path:
    models = eval_models(store)
    with figure(ncols=2) as (fig, axes):
        _grouped(axes[0, 0], store, models, "loops.rate", ".2f")
        axes[0, 0].set(xlabel="task", ylabel="share of chains (fraction)", ylim=(0, 1.1),
                       title="Loops / unfinished at the token cap")
        _grouped(axes[0, 1], store, models, "thinking.parse_rate", ".2f")
        axes[0, 1].set(xlabel="task", ylabel="share of chains (fraction)", ylim=(0, 1.22),
                       title="Chains with a parsable answer")
        axes[0, 0].set_ylim(0, 1.22)
        legend_outside(fig, axes[0, 1], title="model")
        return save(fig, out)


def chain_selection(store: Store, out: Path) -> Path:
    gen, sel = "metrics/generate.json", "metrics/select_chains.json"
    drops = store.mapping(sel, "drop_counts")
    with figure(ncols=2) as (fig, axes):
        ax = axes[0, 0]
        names = ["base: finished", "base: truncated", "teacher"]
        vals = [store.number(gen, "base.finished"), store.number(gen, "base.truncated"),
                store.number(gen, "teacher.chains")]
        bars = ax.bar(names, vals, color=[color(0), color(5), color(2)])
        bar_labels(ax, bars, vals, ",.0f")
        ax.set(ylabel="chains (count)", title="Generated chains", xlabel="source")
        ax.margins(y=0.15)
        ax = axes[0, 1]
        keys = sorted(drops, key=lambda k: -drops[k])
        vals = [store.number(sel, f"drop_counts.{k}") for k in keys]
        bars = ax.barh(keys[::-1], vals[::-1], color=color(4))
        bar_labels(ax, bars, vals[::-1], ",.0f")
        ax.set(xlabel="chains (count)", ylabel="outcome", title="Chain selection outcome")
        ax.margins(x=0.18)
        return save(fig, out)


def _smooth(y: np.ndarray, window: int) -> np.ndarray:
    if len(y) < window:
        return y
    return np.convolve(y, np.ones(window) / window, mode="valid")


def sft_curves(store: Store, out: Path) -> Path:
    rows = store.rows("plots/sft/loss_parts.json", ("step", "chain_loss", "readout_loss"))
    lrs = store.glob("metrics/lr_sweep/*.json")
    chosen = store.number("metrics/choose_lr.json", "chosen_lr")
    with figure(ncols=2) as (fig, axes):
        ax = axes[0, 0]
        steps = np.array([r["step"] for r in rows], dtype=float)
        window = max(1, len(rows) // 40)
        for i, key in enumerate(("chain_loss", "readout_loss")):
            y = np.array([r[key] for r in rows], dtype=float)
            ax.plot(steps, y, color=color(i), alpha=0.2, lw=0.6)
            ax.plot(steps[window - 1:], _smooth(y, window), color=color(i), lw=1.5,
                    label=f"{key.replace('_', ' ')} ({window}-step mean)")
        ax.set(xlabel="optimizer step", ylabel="training loss (nats/token)", title="Joint SFT loss")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7, frameon=False)
        ax = axes[0, 1]
        pts = sorted((store.number(p, "lr"), store.number(p, "dev.nll")) for p in lrs)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color=color(2), label="dev readout NLL")
        for lr, nll in pts:
            if abs(lr - chosen) < 1e-12:
                ax.plot([lr], [nll], "*", ms=14, color=color(5), label=f"chosen lr = {lr:g}")
        ax.set_xscale("log")
        ax.set(xlabel="learning rate (log scale)", ylabel="dev readout NLL (nats/item)", title="Learning-rate sweep")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7, frameon=False)
        return save(fig, out)


def s1mb_scores(store: Store, out: Path) -> Path:
    """Task scores and Task Avg per model, with the item-bootstrap 95% CIs where the stage recorded them."""
    models = models_in(store, "metrics/s1mb/{}.json")
    tasks = sorted(set().union(*(store.mapping(f"metrics/s1mb/{m}.json", "task_scores") for m in models)))
    labels = [task_name(t) for t in tasks] + ["Task Avg"]
    width = 0.8 / len(models)
    with_ci = all(store.has(f"metrics/s1mb/{m}.json", "cis.task_avg.ci_low") for m in models)
    with figure() as (fig, axes):
        ax = axes[0, 0]
        for j, m in enumerate(models):
            rel = f"metrics/s1mb/{m}.json"
            keys = [f"task_scores.{t}" for t in tasks] + ["task_avg"]
            vals = np.array([store.number(rel, k) for k in keys])
            err = None
            if with_ci:
                ci = [(store.number(rel, f"cis.{k}.ci_low"), store.number(rel, f"cis.{k}.ci_high"))
                      if store.has(rel, f"cis.{k}.ci_low") else (v, v) for k, v in zip(keys, vals)]
                err = np.array([[max(v - lo, 0) for v, (lo, _) in zip(vals, ci)],
                                [max(hi - v, 0) for v, (_, hi) in zip(vals, ci)]])
            name = m
            if store.has(rel, "borda.position"):
                name += f" (Borda position {store.number(rel, 'borda.position'):.0f})"
            bars = ax.bar(np.arange(len(labels)) + (j - (len(models) - 1) / 2) * width, vals, width * 0.9,
                          yerr=err, capsize=2, error_kw={"lw": 0.8}, color=color(j), label=name)
            bar_labels(ax, bars, vals, ".2f")
        ax.set_xticks(np.arange(len(labels)), labels)
        ax.set(xlabel="S1MB task", ylabel="baseline-adjusted score (0 = baseline)",
               title="S1MB task scores and Task Avg" + (" with 95% item-bootstrap CIs" if with_ci
                                                          else " (no CIs recorded)"))
        ax.margins(y=0.15)
        legend_outside(fig, ax, title="model")
        return save(fig, out)


# ------------------------------------------------- RL (guarded, issue 10)
RL_PATTERNS = ("reward", "unfinished", "length", "tokens")
RL_PREFERRED = ("reward", "unfinished_share", "mean_completion_tokens", "chain_accuracy")


def rl_series(store: Store) -> list[tuple[str, str, str]]:
    """(file, x column, y column) for per-round RL plot data: plots/rl/**/*.json row lists with a step/round
    column; y columns are the numeric ones named like reward / unfinished / length / tokens (at most 4)."""
    found = []
    for rel in store.glob("plots/rl/**/*.json"):
        rows = store.json(rel)
        if not (isinstance(rows, list) and rows and isinstance(rows[0], dict)):
            continue
        x = next((c for c in ("step", "round") if c in rows[0]), None)
        if x is None:
            continue
        columns = [c for c in rows[0] if c != x and any(p in c for p in RL_PATTERNS + RL_PREFERRED)
                   and isinstance(rows[0][c], (int, float)) and not isinstance(rows[0][c], bool)]
        # the rl stage's headline curves first, then the rest by name
        found += [(rel, x, c) for c in sorted(columns, key=lambda c: (RL_PREFERRED.index(c)
                                                                     if c in RL_PREFERRED else len(RL_PREFERRED), c))]
    return found[:4]


def rl_rounds(store: Store, out: Path) -> Path:
    series = rl_series(store)
    cols = 2 if len(series) > 2 else len(series)
    rows = (len(series) + cols - 1) // cols
    with figure(ncols=cols, nrows=rows, height=2.3 * rows + 0.4) as (fig, axes):
        for ax in axes.flat[len(series):]:
            ax.set_visible(False)
        for i, (ax, (rel, x, y)) in enumerate(zip(axes.flat, series)):
            rows = store.rows(rel, (x, y))
            ax.plot([r[x] for r in rows], [r[y] for r in rows], "-", color=color(i), lw=1.5)
            ax.set(xlabel="optimizer step" if x == "step" else "RL round", ylabel=y.replace("_", " "),
                   title=y.replace("_", " "))
        fig.suptitle("GRPO per step, from the RL stage's rollout log", fontsize=9)
        return save(fig, out)

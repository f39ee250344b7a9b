"""Analysis figures for the report: the improver loop, the routers, RL's own analyses.

Why a module of its own: these read the newer analysis keys (metrics/charter/improve,
evaluate's `router`, rl's `answer_collapse` and `difficulty_adjusted_reward`), each
figure guarded by the files and keys it draws, in the style of `figures.py`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from decision_pipeline.reporting import style
from decision_pipeline.reporting.report.figures import color, figure, legend_outside, models_in, save
from decision_pipeline.reporting.report.sources import Store

IMPROVE = "metrics/charter/improve/{}.json"
EVAL = "metrics/evaluate/{}.json"
RL = "metrics/rl.json"
ROUTERS = (("learned", "learned router"), ("margin", "margin (fixed rule)"))


def improve_candidates(store: Store) -> list[str]:
    return [c for c in models_in(store, IMPROVE) if store.has(IMPROVE.format(c), "history")]


def improver_history(store: Store, out: Path) -> Path:
    """Accept rate per prompt revision for each generator; dashed where the generator ignores its prompt."""
    with figure() as (fig, axes):
        ax = axes[0, 0]
        screened = []
        for i, c in enumerate(improve_candidates(store)):
            rel = IMPROVE.format(c)
            rows = store.raw(rel, "history")
            if not rows:
                screened.append(c)
                continue
            follows = bool(store.raw(rel, "follows_prompt")) if store.has(rel, "follows_prompt") else True
            ax.plot([r["version"] for r in rows], [r["accept_rate"] for r in rows], "-o" if follows else "--o",
                    color=color(i), lw=2, ms=5,
                    label=c + ("" if follows else " (reference: ignores its prompt)"))
            for r in rows:
                if r.get("rule"):
                    ax.annotate(str(r["rule"]), (r["version"], r["accept_rate"]), textcoords="offset points",
                                xytext=(4, 4 + 9 * i), fontsize=7, color=color(i))   # stacked per generator
        screened += [c for c in models_in(store, IMPROVE) if c not in improve_candidates(store)]
        title = "Improver loop: judge accept rate per prompt revision (fresh sample, frozen judge)"
        if screened:
            title += f"\nnot improved (screened out): {', '.join(sorted(screened))}"
        ax.set(xlabel="prompt version (each revision adds one edit, labelled by the failure it targets)",
               ylabel="accept rate", ylim=(-0.05, 1.05), title=title)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=style.GRID_ALPHA)
        legend_outside(fig, ax, where="below", ncols=2)
        return save(fig, out)


def router_models(store: Store) -> list[str]:
    return [m for m in models_in(store, EVAL) if all(store.has(EVAL.format(m), f"router.{k}.fixable_auroc")
                                                     for k, _ in ROUTERS)]


def router_auroc(store: Store, out: Path) -> Path:
    """How well each router ranks 'thinking fixes this readout' (AUROC; 0.5 is chance) per model.

    An AUROC is undefined when a model has no fixable item (or only fixable ones): no bar, the word
    'undefined' instead, never a 0.00 bar below the chance line."""
    models = router_models(store)
    width = 0.8 / len(ROUTERS)
    with figure() as (fig, axes):
        ax = axes[0, 0]
        ax.axhline(0.5, color="0.3", ls="--", lw=1, label="chance (0.5)")
        for j, (key, label) in enumerate(ROUTERS):
            xs = np.arange(len(models)) + (j - (len(ROUTERS) - 1) / 2) * width
            vals = [store.number(EVAL.format(m), f"router.{key}.fixable_auroc", nullable=True) for m in models]
            ax.bar([x for x, v in zip(xs, vals) if v is not None], [v for v in vals if v is not None],
                   width * 0.9, color=color(j), label=label)
            for x, v in zip(xs, vals):
                if v is None:
                    ax.text(x, 0.06, "undefined", rotation=90, ha="center", va="bottom", fontsize=7, color="0.35")
                else:
                    y = v if abs(v - 0.5) > 0.06 else 0.56      # keep the label off the chance line
                    ax.annotate(f"{v:.2f}", (x, y), textcoords="offset points", xytext=(0, 3), ha="center",
                                fontsize=7)
        ax.set_xticks(np.arange(len(models)),
                      [f"{m}\n({int(store.number(EVAL.format(m), 'router.n_fixable'))} fixable)"
                       if store.has(EVAL.format(m), "router.n_fixable") else m for m in models])
        ax.set(ylabel="AUROC", ylim=(0, 1.05),
               title="Routers: ranking the items whose thinking fixes a wrong readout (eval split)")
        legend_outside(fig, ax)
        return save(fig, out)


def has_rl_analyses(store: Store) -> bool:
    return store.has(RL, "answer_collapse") and store.has(RL, "difficulty_adjusted_reward.rounds")


def rl_analyses(store: Store, out: Path) -> Path:
    """Answer collapse (top answer's share vs the gold's) and, per round, chain right minus the prompt's
    probe pass rate (a rising line is learning, not easier prompts)."""
    collapse = store.raw(RL, "answer_collapse")
    adjusted = store.raw(RL, "difficulty_adjusted_reward.rounds")
    with figure(ncols=2) as (fig, axes):
        ax = axes[0, 0]
        x = [r["round"] for r in collapse]
        ax.plot(x, [r["top_answer_share"] for r in collapse], "-", color=color(0), lw=2,
                label="share of parsed answers on the most common option")
        fair = all("top_answer_gold_share" in r for r in collapse)  # runs before it have the gold top share
        ax.plot(x, [r["top_answer_gold_share" if fair else "top_gold_share"] for r in collapse], "--",
                color=color(1), lw=1.5, label="share of the same completions whose gold is that option" if fair
                else "top share of the gold options of the same completions")
        ax.set(xlabel="RL round", ylabel="share", ylim=(0, 1.05),
               title="Answer collapse: one option taking over?")
        ax.grid(alpha=style.GRID_ALPHA)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7, frameon=False)
        ax = axes[0, 1]
        rx, ry = [r["round"] for r in adjusted], [r["adjusted_reward"] for r in adjusted]
        ax.plot(rx, ry, "o", color=color(2), ms=4, label="per round")
        slope = "difficulty_adjusted_reward.slope_per_round"
        if store.has(RL, f"{slope}.point") and len(rx) > 1:
            b = store.number(RL, f"{slope}.point")
            a = float(np.mean(ry)) - b * float(np.mean(rx))
            lo, hi = store.number(RL, f"{slope}.ci_low"), store.number(RL, f"{slope}.ci_high")
            ax.plot(rx, [a + b * v for v in rx], "-", color="0.2", lw=1.5,
                    label=f"slope {b:+.4f}/round, 95% CI [{lo:+.4f}, {hi:+.4f}]")
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set(xlabel="RL round", ylabel="chain right minus probe pass rate",
               title="Difficulty-adjusted reward")
        ax.grid(alpha=style.GRID_ALPHA)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7, frameon=False)
        return save(fig, out)


ABLATION = "metrics/curate_ablation.json"


def has_ablation(store: Store) -> bool:
    return store.exists(ABLATION) and bool(store.raw(ABLATION, "rows"))


def _ablation_label(r: dict) -> str:
    return f"{r['mode']}, overfill {r['overfill']:g}"


def curate_ablation(store: Store, out: Path) -> Path:
    """One bar per experiment (fill mode x list depth): the curated GPT's tune-set perplexity, mean over its
    seeds with the min-max range; a log axis, since a bad fill rule can be ten times worse."""
    rows = store.raw(ABLATION, "rows")
    with figure() as (fig, axes):
        ax = axes[0, 0]
        modes = list(dict.fromkeys(r["mode"] for r in rows))
        y = list(range(len(rows)))[::-1]
        for yi, r in zip(y, rows):
            err = [[r["ppl_mean"] - r["ppl_min"]], [r["ppl_max"] - r["ppl_mean"]]]
            ax.barh(yi, r["ppl_mean"], color=color(modes.index(r["mode"])), alpha=0.8)
            ax.errorbar(r["ppl_mean"], yi, xerr=err, fmt="none", color="0.2", capsize=4, lw=1.5)
            note = f"{r['ppl_mean']:.2f}" + (f", {r['fallback_docs']} fallback docs" if r.get("fallback_docs") else "")
            ax.annotate(note, (r["ppl_max"], yi), textcoords="offset points", xytext=(4, -3), fontsize=7)
        ax.set_yticks(y, [_ablation_label(r) for r in rows], fontsize=8)
        ax.set_xscale("log")
        seeds = rows[0]["seeds"]
        ax.set(xlabel=f"curated GPT tune-set perplexity (mean of {seeds} seeds, bar min-max; log scale)",
               title="Curation ablation (dvc exp run, pretrain@curated)")
        ax.grid(alpha=style.GRID_ALPHA, axis="x")
        return save(fig, out)

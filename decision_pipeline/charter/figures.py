"""The five figures of generator selection (matplotlib, Agg): cost vs quality, quality
ranking, quality by dimension, robustness by safety score, judge calibration."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from decision_pipeline.charter.rubric import DIMENSIONS  # noqa: E402
from decision_pipeline.charter.seed import SAFETY_SCORES  # noqa: E402
from decision_pipeline.common.io import write_bytes_atomic  # noqa: E402


def _save(fig: plt.Figure, path: str | Path) -> None:
    import io
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, buf.getvalue())


def cost_vs_quality(rows: list[dict], budget: float, path: str | Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in rows:
        x = r["gpu_hours"] if r["gpu_hours"] is not None else 0.0
        ax.scatter(x, r["accept_rate"] or 0, marker="o" if r["gpu_hours"] is not None else "s")
        label = r["candidate"] + ("" if r["gpu_hours"] is not None else " (rule, no GPU)")
        ax.annotate(label, (x, r["accept_rate"] or 0), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.axvline(budget, ls="--", c="grey", lw=1, label=f"budget {budget:,.0f} GPU-h")
    ax.set_xlabel("extrapolated GPU-hours (workload)")
    ax.set_ylabel("judge accept rate")
    ax.set_title("Cost vs quality")
    ax.legend(fontsize=7)
    _save(fig, path)


def quality_ranking(rows: list[dict], path: str | Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = [f"{r['rank']}. {r['candidate']}" for r in rows]
    ax.barh(names[::-1], [r["accept_rate"] or 0 for r in rows][::-1],
            color=["tab:blue" if r["affordable"] else "lightgrey" for r in rows][::-1])
    ax.set_xlim(0, 1)
    ax.set_xlabel("judge accept rate (grey: unaffordable)")
    ax.set_title("Quality ranking")
    _save(fig, path)


def quality_by_dimension(rows: list[dict], path: str | Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / max(1, len(rows))
    for i, r in enumerate(rows):
        vals = [r["dimension_means"][d] or 0 for d in DIMENSIONS]
        ax.bar([j + i * width for j in range(len(DIMENSIONS))], vals, width, label=r["candidate"])
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(DIMENSIONS))], DIMENSIONS)
    ax.set_ylim(0, 5)
    ax.set_ylabel("mean score (1-5, both voices)")
    ax.set_title("Quality by dimension")
    ax.legend(fontsize=7)
    _save(fig, path)


def robustness_by_safety(rows: list[dict], path: str | Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in rows:
        ys = [r["accept_rate_by_safety"][str(s)] for s in SAFETY_SCORES]
        ax.plot(SAFETY_SCORES, [y if y is not None else float("nan") for y in ys], marker="o", label=r["candidate"])
    ax.set_xlabel("document safety score (0 benign - 5 most unsafe)")
    ax.set_ylabel("judge accept rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Robustness by safety score")
    ax.legend(fontsize=7)
    _save(fig, path)


def judge_calibration(table: dict[str, dict[str, int]], kappa: dict, path: str | Path) -> None:
    """Confusion of judge vs human reference verdicts, with kappa and its CI in the title."""
    fig, ax = plt.subplots(figsize=(4.5, 4))
    labels = ("accept", "reject")
    mat = [[table[j][h] for h in labels] for j in labels]
    ax.imshow(mat, cmap="Blues")
    for i in range(2):
        for j in range(2):
            ax.text(j, i, str(mat[i][j]), ha="center", va="center")
    ax.set_xticks([0, 1], [f"human {x}" for x in labels])
    ax.set_yticks([0, 1], [f"judge {x}" for x in labels])
    k = kappa.get("kappa")
    lo, hi = kappa.get("ci_low"), kappa.get("ci_high")
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None else ""
    ax.set_title(f"Judge calibration (validation): kappa={k:.2f}{ci}" if k is not None else "kappa undefined",
                 fontsize=9)
    _save(fig, path)

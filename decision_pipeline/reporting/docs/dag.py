"""The pipeline drawn for a person: one box per stage family, arrows between families.

Why: `dvc dag` prints 50+ stages as a wall of asterisks. Grouping the stages
into the research chain's families (data, annotation, curation, pretraining,
decision model, RL, benchmark, report) gives a picture that fits a page, and
`docs/dag.png` is committed with `docs/dag.json` beside it: the stage and edge
list it was drawn from and their digest, so a test can tell when dvc.yaml has
moved on without redrawing (`make dag` redraws).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.dvcfiles import pipeline_files
from decision_pipeline.common.io import write_bytes_atomic, write_text_atomic
from decision_pipeline.common.yamlio import load_yaml

# Family -> the dvc.yaml stage names (before any @item) it holds, in pipeline order.
FAMILIES: dict[str, tuple[str, ...]] = {
    "data": ("items", "ingest"),
    "curation": ("tokenizer", "curate"),
    "pretraining": ("pretrain", "pretrain_compare", "base_model"),
    "annotation": ("seed_sample", "improve", "reflect", "judge", "reviews", "judge_prompt", "judge_agreement", "throughput",
                   "rank_generators"),
    "decision model": ("generate", "select_chains", "lr_sweep", "choose_lr", "sft", "calibrate", "evaluate",
                       "cross_route"),
    "RL": ("rl_probe", "rl_select", "rl"),
    "benchmark": ("s1mb_data", "s1mb"),
    "report": ("report",),
}
# Hand-laid centres (x: left to right along the chain, y: up) in data units; boxes grow with their lists.
POSITIONS: dict[str, tuple[float, float]] = {
    "data": (0.0, 0.0), "curation": (1.2, 1.3), "pretraining": (2.4, 1.3), "annotation": (3.6, 2.55),
    "decision model": (3.6, 0.0), "RL": (4.8, -1.6), "benchmark": (6.0, 1.75), "report": (7.2, -1.6),
}
BOX_W, LINE_H, HEAD_H = 1.0, 0.13, 0.4
WHAT = {
    "data": "questions and the document pool", "curation": "documents into a token budget",
    "pretraining": "small GPTs, held-out ppl", "annotation": "generator and judge selection",
    "decision model": "chains, SFT, calibration, eval", "RL": "GRPO on the SFT model",
    "benchmark": "S1MB scores", "report": "reads every family's metrics",
}
_EDGE = re.compile(r'^"([^"]+)" -> "([^"]+)";$')


def family_of(stage: str) -> str:
    """The family of a stage name (with or without @item); an unmapped stage is an error naming it."""
    base = stage.split("@", 1)[0]
    for fam, names in FAMILIES.items():
        if base in names:
            return fam
    raise PipelineError(f"dvc.yaml: stage '{base}' has no family in decision_pipeline/reporting/docs/dag.py FAMILIES; "
                        f"add it there, then `make dag`")


def yaml_stages(root: Path) -> list[str]:
    """Stage names as the pipeline's dvc.yaml files declare them (foreach stages once, without @item)."""
    return [name for path in pipeline_files(root)
            for name in (load_yaml(path.read_text(encoding="utf-8"), str(path)) or {}).get("stages", {})]


def _bare(node: str) -> str:
    """A stage's name without the file DVC prefixes in a part (`pipelines/curation/dvc.yaml:curate@random`)."""
    return node.rsplit("dvc.yaml:", 1)[-1]


def dvc_graph(root: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """Expanded stages and edges (upstream -> downstream) as `dvc dag --dot` reports them, sorted."""
    proc = subprocess.run([sys.executable, "-m", "dvc", "dag", "--dot"], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PipelineError(f"dvc.yaml: `dvc dag --dot` failed ({last})")
    nodes, edges = set(), set()
    for line in proc.stdout.splitlines():
        line = line.strip()
        m = _EDGE.match(line)
        if m:
            edges.add((_bare(m.group(1)), _bare(m.group(2))))
        elif line.startswith('"') and line.endswith('";'):
            nodes.add(_bare(line[1:-2]))
    return sorted(nodes), sorted(edges)


def digest(stages: list[str], edges: list[tuple[str, str]]) -> str:
    """What the picture depends on: stages, edges and the family mapping."""
    blob = json.dumps({"stages": stages, "edges": edges, "families": FAMILIES}, sort_keys=True)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def family_edges(edges: list[tuple[str, str]]) -> Counter:
    """Stage edges counted per (upstream family, downstream family); edges inside a family dropped."""
    out: Counter = Counter()
    for a, b in edges:
        fa, fb = family_of(a), family_of(b)
        if fa != fb:
            out[(fa, fb)] += 1
    return out


def stage_summary(stages: list[str], family: str) -> list[str]:
    """One line per stage of a family: 'curate ×3' for a foreach stage with three items."""
    counts = Counter(s.split("@", 1)[0] for s in stages if family_of(s) == family)
    return [f"{n} \u00d7{counts[n]}" if any(s.startswith(n + "@") for s in stages) else n
            for n in FAMILIES[family] if n in counts]


def box_height(n_lines: int) -> float:
    return HEAD_H + LINE_H * n_lines + 0.1


def _edge_point(centre: tuple[float, float], half: tuple[float, float], toward: tuple[float, float]) -> tuple[float, float]:
    """Where the segment from a box's centre toward a point leaves the box (so arrowheads stay visible)."""
    dx, dy = toward[0] - centre[0], toward[1] - centre[1]
    t = min(half[0] / abs(dx) if dx else float("inf"), half[1] / abs(dy) if dy else float("inf"))
    return centre[0] + dx * t, centre[1] + dy * t


MARGIN = 0.12   # data units of white around the outermost boxes (their rounded pad and stroke included)


def limits(lines: dict[str, list[str]]) -> tuple[tuple[float, float], tuple[float, float]]:
    """The drawing's x and y range: every box with MARGIN to spare. A fixed range clipped the top of the
    'annotation' box once its stage list grew (issue 54)."""
    xs = [x + sign * BOX_W / 2 for x, _ in POSITIONS.values() for sign in (-1, 1)]
    ys = [y + sign * box_height(len(lines[fam])) / 2 for fam, (_, y) in POSITIONS.items() for sign in (-1, 1)]
    return (min(xs) - MARGIN, max(xs) + MARGIN), (min(ys) - MARGIN, max(ys) + MARGIN)


def draw(stages: list[str], edges: list[tuple[str, str]], out: Path, stamp: str,
         ylim: tuple[float, float] | None = None) -> Path:
    """Boxes at the hand-laid positions, one arrow per family pair (width by stage-edge count); `ylim`
    overrides the fitted y range (the tests draw the old fixed one)."""
    import io

    import matplotlib
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    from decision_pipeline.reporting import style
    from decision_pipeline.reporting.layout import figure_problems

    fam_edges = family_edges(edges)
    lines = {fam: stage_summary(stages, fam) for fam in POSITIONS}
    half = {fam: (BOX_W / 2 + 0.03, box_height(len(lines[fam])) / 2 + 0.03) for fam in POSITIONS}
    with matplotlib.rc_context(style.DAG_RC):
        fig = style.agg_figure(style.DAG_SIZE, style.DPI)
        ax = fig.add_axes((0.005, 0.04, 0.99, 0.9))
        xlim, fitted = limits(lines)
        ax.set_xlim(*xlim)
        ax.set_ylim(*(ylim or fitted))
        ax.axis("off")
        for (fa, fb), n in sorted(fam_edges.items()):
            if fb == "report":
                continue                      # every family feeds it: said in its box, not with 7 arrows
            (xa, ya), (xb, yb) = POSITIONS[fa], POSITIONS[fb]
            two_way = (fb, fa) in fam_edges
            off = 0.07 if two_way else 0.0                    # two-way pairs: two parallel arrows
            nx, ny = -(yb - ya), xb - xa
            norm = (nx * nx + ny * ny) ** 0.5 or 1.0
            sa = (xa + off * nx / norm, ya + off * ny / norm)
            sb = (xb + off * nx / norm, yb + off * ny / norm)
            ax.add_patch(FancyArrowPatch(_edge_point(sa, half[fa], sb), _edge_point(sb, half[fb], sa),
                                         arrowstyle="-|>", mutation_scale=13, shrinkA=0, shrinkB=0,
                                         lw=min(0.8 + 0.2 * n, 3.0), color="0.2", zorder=1))
        for fam, (x, y) in POSITIONS.items():
            h = box_height(len(lines[fam]))
            top = y + h / 2
            ax.add_patch(FancyBboxPatch((x - BOX_W / 2, y - h / 2), BOX_W, h, boxstyle="round,pad=0.02",
                                        **style.DAG_BOX, lw=1.2, zorder=2))
            ax.text(x, top - 0.06, fam, ha="center", va="top", fontsize=10, weight="bold", zorder=3)
            ax.text(x, top - 0.24, WHAT[fam], ha="center", va="top", fontsize=6.5, style="italic",
                    color="0.3", zorder=3)
            ax.text(x, top - HEAD_H, "\n".join(lines[fam]), ha="center", va="top", fontsize=7,
                    family="monospace", zorder=3, linespacing=1.35)
        fig.suptitle("The pipeline by stage family (from dvc.yaml). Arrow: the later family reads outputs of the "
                     "earlier; thicker = more stage-to-stage edges", fontsize=9, y=0.985)
        fig.text(0.005, 0.008, f"{len(stages)} stages, {len(edges)} stage edges; {stamp}; "
                 "redraw with `make dag`; per-stage detail: `dvc stage list`, `dvc dag`", fontsize=7, color="0.4")
        problems = figure_problems(fig, boxes=True)
        if problems:
            raise PipelineError(f"{out}: layout problem in the drawing ({problems[0]}); adjust POSITIONS in dag.py")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=style.DPI, facecolor=style.BACKGROUND,
                    metadata={"Software": None, "Comment": stamp})
    write_bytes_atomic(out, buf.getvalue())
    return out


def write(root: Path, png: Path, record: Path) -> dict:
    """Draw docs/dag.png and record what it was drawn from in docs/dag.json."""
    missing = sorted(set(yaml_stages(root)) - {n for names in FAMILIES.values() for n in names})
    if missing:
        family_of(missing[0])                      # raises naming the stage
    stages, edges = dvc_graph(root)
    stamp = digest(stages, edges)
    draw(stages, edges, png, stamp)
    fam_edges = family_edges(edges)
    body = {"digest": stamp, "families": {f: list(v) for f, v in FAMILIES.items()},
            "family_edges": [[a, b, n] for (a, b), n in sorted(fam_edges.items())],
            "stages": stages, "edges": [list(e) for e in edges]}
    write_text_atomic(record, json.dumps(body, indent=1) + "\n")
    return {"stages": len(stages), "edges": len(edges), "family_edges": len(fam_edges), "digest": stamp}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".", help="repository root holding dvc.yaml")
    ap.add_argument("--out", default="docs/dag.png")
    ap.add_argument("--record", default="docs/dag.json", help="stage/edge list and digest the picture shows")
    args = ap.parse_args(argv)
    root = Path(args.root)
    try:
        counts = write(root, root / args.out, root / args.record)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"dag: {args.out} ({counts['stages']} stages, {counts['edges']} edges, "
          f"{counts['family_edges']} family arrows, {counts['digest']})")
    return 0


"""`dvc plots diff` as a folder a reviewer can open offline: matplotlib PNGs and one plain HTML page.

Why: DVC's `dvc plots diff` page draws its data plots with Vega scripts loaded
from a CDN, so offline (or from a zipped review folder) they are blank boxes.
`dvc plots diff <rev> --json` carries each data plot as a Vega-Lite spec with the
data inline (a `rev` value per revision) and writes the image plots to `-o`.
This redraws each spec with matplotlib (one PNG, one line per revision x field),
copies the images, and writes an `index.html` without scripts or external links.

Read from a spec (dvc-render's templates): x/y fields and axis titles, the series
split (`rev` plus the strokeDash/shape field: `field` for several y columns,
`filename` for several files), DVC's colours and dashes, whether a loess layer
exists. dvc-render 1.x's `linear` template *is* `smooth` (same spec), so both are
drawn alike: raw points faintly plus a centred moving average once a series is
long enough for averaging to matter, else a plain line. `simple` draws lines,
`scatter` points; other marks (bar, confusion) are listed as not drawn. Errors in
DVC's JSON (a plot file missing in one revision) are listed on the page, never
raised: a review must still open when one revision lacks a file.

    python -m decision_pipeline plots-diff --base main --out review/plots
"""
from __future__ import annotations

import argparse
import html
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_bytes_atomic, write_text_atomic
from decision_pipeline.reporting import style

MIN_POINTS_TO_SMOOTH = 60   # below this a moving average hides more than it shows (window would be < 3)
POINTS_PER_WINDOW = 20      # window ~ n / 20 points: 101 steps of a 2000-step loss, 13 of a 244-step one
CSS = ("body{font-family:sans-serif;margin:1.5em;max-width:1500px}figure{display:inline-block;margin:0 1em 1.5em 0;"
       "vertical-align:top}figure img{max-width:720px;width:100%}table{border-collapse:collapse}td,th{border:1px "
       "solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}td img{max-width:600px}.miss{color:#a33}")


class UnsupportedPlot(ValueError):
    """A spec this renderer does not draw (bar, confusion, custom template); listed on the page."""


@dataclass
class Spec:
    """What a dvc-render Vega-Lite spec says about one data plot."""
    title: str
    x: str
    x_title: str
    y: str
    y_title: str
    split: list[str]
    smooth: bool
    points: bool
    colors: dict[str, str]              # rev -> DVC's colour
    dashes: dict[str, tuple[float, ...]]  # field/file -> DVC's dash pattern


def _dicts(obj: Any) -> Iterator[dict]:
    """Every dict in a spec, depth first, skipping the inline data (thousands of rows, no encodings)."""
    if isinstance(obj, dict):
        yield obj
        for k, v in obj.items():
            if k != "data":
                yield from _dicts(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _dicts(v)


def _channel(spec: dict, name: str) -> dict:
    """The first un-aggregated `name` channel with a field, in any layer (dvc-render repeats them per layer)."""
    for d in _dicts(spec):
        ch = d.get("encoding", {}).get(name) if isinstance(d.get("encoding"), dict) else None
        if isinstance(ch, dict) and isinstance(ch.get("field"), str) and "aggregate" not in ch:
            return ch
    raise UnsupportedPlot(f"no {name} field in the spec")


def _scale(ch: Any) -> dict[str, Any]:
    scale = ch.get("scale", {}) if isinstance(ch, dict) else {}
    return dict(zip(map(str, scale.get("domain", [])), scale.get("range", [])))


def parse_spec(spec: dict) -> Spec:
    """Fields, titles, series split and style of a dvc-render spec; UnsupportedPlot for marks not drawn here."""
    marks = {(d["mark"] if isinstance(d["mark"], str) else d["mark"].get("type")) for d in _dicts(spec)
             if isinstance(d.get("mark"), (str, dict))}
    if not marks & {"line", "point", "circle"} or marks & {"bar", "rect", "text"}:
        raise UnsupportedPlot(f"marks {sorted(map(str, marks))} (only line/point templates are drawn offline)")
    x, y, enc = _channel(spec, "x"), _channel(spec, "y"), spec.get("encoding", {})
    split = ["rev"]
    for ch in (enc.get("strokeDash"), enc.get("shape")):
        if isinstance(ch, dict) and isinstance(ch.get("field"), str) and ch["field"] not in split:
            split.append(ch["field"])
    for d in _dicts(spec):
        split += [g for g in d.get("groupby", []) if "loess" in d and isinstance(g, str) and g not in split]
    title = spec.get("title", "")
    dashes = {k: tuple(float(v) for v in r) for k, r in _scale(enc.get("strokeDash")).items()
              if isinstance(r, list) and len(r) == 2 and r[1]}
    return Spec(title=str(title.get("text", "") if isinstance(title, dict) else title), x=x["field"],
                x_title=str(x.get("title") or x["field"]), y=y["field"], y_title=str(y.get("title") or y["field"]),
                split=split, smooth=any("loess" in d for d in _dicts(spec)), points="line" not in marks,
                colors={k: str(v) for k, v in _scale(enc.get("color")).items()}, dashes=dashes)


def _num(v: Any) -> float | None:
    try:
        return float(v) if np.isfinite(float(v)) else None
    except (TypeError, ValueError):
        return None


def series(spec: Spec, rows: Sequence[dict]) -> tuple[dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]], list[str]]:
    """Rows grouped by the split fields, sorted by x; non-numeric x become category positions (returned)."""
    cats = [] if all(_num(r.get(spec.x)) is not None for r in rows if spec.x in r) else \
        list(dict.fromkeys(str(r[spec.x]) for r in rows if spec.x in r))
    groups: dict[tuple[str, ...], list[tuple[float, float]]] = {}
    for r in rows:
        xv = float(cats.index(str(r[spec.x]))) if cats and spec.x in r else _num(r.get(spec.x))
        yv = _num(r.get(spec.y))
        if xv is not None and yv is not None:
            groups.setdefault(tuple(str(r.get(f, "")) for f in spec.split), []).append((xv, yv))
    arrays = {key: np.array(sorted(pts, key=lambda p: p[0])) for key, pts in groups.items()}
    return {key: (a[:, 0], a[:, 1]) for key, a in arrays.items()}, cats


def window(n: int) -> int:
    """Odd moving-average width for n points (odd keeps it centred); 1 (no smoothing) for short series."""
    return 1 if n < MIN_POINTS_TO_SMOOTH else max(3, n // POINTS_PER_WINDOW) | 1


def moving_average(y: np.ndarray, w: int) -> np.ndarray:
    """Centred mean over w points, shrinking at the ends so the curve spans the whole x range."""
    if w <= 1 or len(y) == 0:
        return y.astype(float)
    cs, h, i = np.concatenate([[0.0], np.cumsum(y, dtype=float)]), w // 2, np.arange(len(y))
    lo, hi = np.maximum(i - h, 0), np.minimum(i + h + 1, len(y))
    return (cs[hi] - cs[lo]) / (hi - lo)


TITLE_CHARS = 90   # a title longer than this wraps: centred over a plot narrowed by its legend it ran off the edge


def render_png(plot_id: str, content: dict, path: Path) -> tuple[Path, list[str]]:
    """One data plot as a PNG: a line (or points) per revision x field, labelled, axes titled from the spec;
    with the layout defects the report's checker finds in it (a title cut off at the edge, ...)."""
    import textwrap

    from decision_pipeline.reporting.layout import figure_problems

    spec = parse_spec(content)
    data = content.get("data", {}).get("values", [])
    groups, cats = series(spec, data if isinstance(data, list) else [])
    if not groups:
        raise UnsupportedPlot(f"no numeric {spec.x!r}/{spec.y!r} values in the data")
    with matplotlib.rc_context(style.REVIEW_RC):
        fig = style.agg_figure(style.REVIEW_SIZE, style.DPI, layout="constrained")
        ax = fig.subplots()
        revs = list(dict.fromkeys(k[0] for k in groups))
        subs = list(dict.fromkeys(k[1:] for k in groups))  # field/file within a revision: dash + marker
        for key, (xs, ys) in groups.items():
            color = spec.colors.get(key[0]) or style.DVC_PALETTE[revs.index(key[0]) % len(style.DVC_PALETTE)]
            dash = spec.dashes.get(key[1]) if len(key) > 1 else None
            line: Any = (0, dash) if dash else "-"
            label, w = " · ".join(k for k in key if k), window(len(xs)) if spec.smooth else 1
            if spec.points:
                ax.scatter(xs, ys, s=12, color=color, label=label)
            elif w > 1:
                ax.plot(xs, ys, color=color, alpha=0.2, linewidth=0.7)
                ax.plot(xs, moving_average(ys, w), color=color, linestyle=line, linewidth=1.6,
                        label=f"{label} (mean of {w})")
            else:
                marker = style.MARKERS[subs.index(key[1:]) % len(style.MARKERS)] if len(xs) <= 30 else None
                ax.plot(xs, ys, color=color, linestyle=line, linewidth=1.5, marker=marker, markersize=4, label=label)
        if cats:
            ax.set_xticks(range(len(cats)), cats, rotation=30, ha="right")
        ax.set_xlabel(spec.x_title)
        ax.set_ylabel(spec.y_title)
        # over the whole figure, wrapped: over the axes alone a long title ran past the left edge (issue 54)
        fig.suptitle("\n".join(textwrap.wrap(spec.title or plot_id, TITLE_CHARS)), fontsize=style.REVIEW_RC["axes.titlesize"])
        smoothed = spec.smooth and not spec.points and any(window(len(xs)) > 1 for xs, _ in groups.values())
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                  title="faint: raw points\nbold: centred moving average" if smoothed else None,
                  title_fontproperties={"size": 8})
        problems = [p for p in figure_problems(fig) if " is hidden under " not in p]  # identical revisions are news here
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    write_bytes_atomic(path, buf.getvalue())
    return path, problems


def _slug(text: str) -> str:
    """A file-name-safe form of a plot id or revision (`plots/sft/loss.png` -> `plots_sft_loss`)."""
    text = re.sub(r"\.(json|csv|tsv|ya?ml|png|jpe?g|svg)$", "", text)
    return re.sub(r"[^A-Za-z0-9-]+", "_", text).strip("_") or "plot"


def _error_text(e: Any) -> str:
    return f"{e.get('type', 'error')}: {e.get('msg', '')}" if isinstance(e, dict) else str(e)


def _missing(pid: str, order: Sequence[str], present: Sequence[str], by_key: dict) -> list[str]:
    """'missing in main: FileNotFoundError ...' per revision without this plot or with an error for it."""
    return [f"{'in' if r in present else 'missing in'} {r}: {'; '.join(by_key.get((pid, r), ['no data']))}"
            for r in order if r not in present or (pid, r) in by_key]


def render_page(payload: dict, out: Path, revs: Sequence[str] = ()) -> Path:
    """PNGs under out/data, image plots copied under out/images, and out/index.html; returns the page's path.

    `payload` is `dvc plots diff --json`'s object. `revs` fixes the column order (base first); revisions
    found only in the payload follow. out/data and out/images are replaced so no stale plot survives.
    """
    data: dict[str, list[dict]] = payload.get("data") or {}
    errors: list[Any] = list(payload.get("errors") or [])
    order = list(dict.fromkeys([*revs, *(str(r) for es in data.values() for e in es for r in e.get("revisions", []))]))
    for sub in ("data", "images"):
        shutil.rmtree(out / sub, ignore_errors=True)
    by_key: dict[tuple[str, str], list[str]] = {}
    for e in errors:
        if isinstance(e, dict):
            by_key.setdefault((str(e.get("name")), str(e.get("rev"))), []).append(_error_text(e))
    problems = [(str(e.get("rev", "")), str(e.get("name", "")), str(e.get("source", "")), _error_text(e))
                if isinstance(e, dict) else ("", "", "", str(e)) for e in errors]
    esc = html.escape
    figures, images = [], []
    for i, (pid, entries) in enumerate(data.items()):
        cells: dict[str, str] = {}
        for e in entries:
            present = [str(r) for r in e.get("revisions", [])]
            if e.get("type") == "vega":
                rel = f"data/{i:02d}_{_slug(pid)}.png"
                try:
                    _, layout = render_png(pid, e.get("content") or {}, out / rel)
                except (UnsupportedPlot, KeyError, TypeError, ValueError) as exc:
                    problems.append((", ".join(present), pid, "", f"not drawn offline: {exc}"))
                    continue
                problems += [(", ".join(present), pid, rel, f"layout: {p}") for p in layout]
                notes = "".join(f"<br><span class=miss>{esc(n)}</span>" for n in _missing(pid, order, present, by_key))
                figures.append(f'<figure><img src="{rel}" alt="{esc(pid)}"><figcaption><code>{esc(pid)}</code> '
                               f'({esc(", ".join(present))}){notes}</figcaption></figure>')
            elif e.get("type") == "image":
                src = Path(str(e.get("url", "")))
                for r in present:
                    if not src.is_file():
                        problems.append((r, pid, str(src), "image file DVC reported is not on disk"))
                        continue
                    rel = f"images/{_slug(r)}/{i:02d}_{_slug(pid)}{src.suffix}"
                    (out / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, out / rel)
                    cells[r] = f'<img src="{rel}" alt="{esc(pid)} at {esc(r)}">'
            else:
                problems.append((", ".join(present), pid, "", f"plot type {e.get('type')!r} not drawn offline"))
        if cells:
            images.append(f"<tr><td><code>{esc(pid)}</code></td>" + "".join(
                f"<td>{cells[r]}</td>" if r in cells else
                f"<td class=miss>{esc(_missing(pid, [r], [], by_key)[0])}</td>" for r in order) + "</tr>")
    rows = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in p) + "</tr>" for p in problems)
    title = f"dvc plots diff: {' vs '.join(order) or 'no revisions'}"
    body = [f"<h1>{esc(title)}</h1>",
            "<p>Drawn offline from <code>dvc plots diff --json</code> by <code>decision_pipeline.reporting."
            "review.plots_diff</code>: PNGs and copied images next to this page, no scripts, no network.</p>",
            f"<h2>Problems: errors in DVC's JSON, plots not drawn ({len(problems)})</h2>",
            f"<table><tr><th>revision</th><th>plot</th><th>file</th><th>error</th></tr>{rows}</table>"
            if problems else "<p>None.</p>", f"<h2>Data plots ({len(figures)})</h2>", *figures,
            f"<h2>Image plots ({len(images)})</h2>",
            "<table><tr><th>plot</th>" + "".join(f"<th>{esc(r)}</th>" for r in order) + "</tr>" + "".join(images)
            + "</table>" if images else "<p>None.</p>"]
    page = out / "index.html"
    write_text_atomic(page, f'<!doctype html><html><head><meta charset="utf-8"><title>{esc(title)}</title>'
                            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
    return page


def dvc_plots_json(base: str, images_dir: Path, cwd: Path | None = None) -> dict:
    """`dvc plots diff <base> --json -o images_dir`: the spec/data payload; image plots land in images_dir."""
    cmd = [sys.executable, "-m", "dvc", "plots", "diff", base, "--json", "-o", str(images_dir)]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise PipelineError(f"`dvc plots diff {base} --json` failed: {last}")
    try:
        return json.loads(proc.stdout or "{}")
    except json.JSONDecodeError as exc:
        raise PipelineError(f"`dvc plots diff {base} --json` printed no JSON ({exc}): {proc.stdout[:200]!r}")


def build(base: str, out: Path, cwd: Path | None = None) -> Path:
    """Run DVC against `base`, render the workspace-vs-base page into `out`; returns out/index.html."""
    with tempfile.TemporaryDirectory(prefix="plots-diff-") as tmp:
        return render_page(dvc_plots_json(base, Path(tmp), cwd), out, revs=[base, "workspace"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="main", help="git revision to compare the workspace with")
    ap.add_argument("--out", default="review/plots", help="folder for index.html, data/ and images/")
    args = ap.parse_args(argv)
    try:
        page = build(args.base, Path(args.out))
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(page.resolve())  # absolute, so it can be pasted into a browser
    return 0


"""Layout checks for a drawn matplotlib figure: the defects a reader sees, found by geometry.

Why at build time: a cut-off legend, two labels printed over each other, a value
label struck through by a reference line, or a legend covering bars cannot be
spotted in the JSON behind a figure and pass every numeric test. Each check
works on the drawn figure's display boxes (the same ones the PNG shows), so
the report build and the tests can list them in words ('figure X: text "0.52"
overlaps text "0.36"') instead of a person paging through the PDF.
"""
from __future__ import annotations

import re
from itertools import combinations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import Collection
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox

TOL = 1.0          # pixels of overlap tolerated (antialiasing, rounding)
MIN_TICK_GAP = 3.0  # pixels between neighbouring tick labels of one axis: closer, two read as one ('benchcalib.')
HIDE_PX = 1.5      # a series whose every point lies this close to a later series' points is drawn under it
HALO_PT = 1.0      # ... unless it is at least this much wider (in points), so that it shows as a rim


def _undrawn_ticks(fig: Figure) -> set[int]:
    """Tick labels matplotlib keeps but does not draw: their tick lies outside the axis' view interval."""
    hidden: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            eps = (hi - lo) * 1e-6
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                loc = tick.get_loc()
                if loc is None or not (lo - eps <= loc <= hi + eps):
                    hidden.update((id(tick.label1), id(tick.label2)))
    return hidden


def _visible_texts(fig: Figure) -> list[Text]:
    """Every drawn, non-empty text of the figure (titles, ticks, labels, legends, annotations)."""
    hidden = _undrawn_ticks(fig)
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or id(t) in hidden:
            continue
        if any(not a.get_visible() for a in _ancestors(t)):
            continue
        out.append(t)
    return out


def _ancestors(artist) -> list:
    """Axis objects whose tick labels are off still hold invisible tick texts: follow the chain up."""
    chain, a = [], getattr(artist, "axes", None)
    if a is not None:
        chain.append(a)
    return chain


def _shrink(b: Bbox, px: float) -> Bbox:
    return Bbox.from_extents(b.x0 + px, b.y0 + px, b.x1 - px, b.y1 - px)


def _overlap(a: Bbox, b: Bbox) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > TOL) and (min(a.y1, b.y1) - max(a.y0, b.y0) > TOL)


def _name(t: Text) -> str:
    text = " ".join(t.get_text().split())
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _title(fig: Figure) -> str:
    sup = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    return (sup or (titles[0] if titles else "figure"))[:60]


def _data_paths(ax: Axes):
    """Display-space paths of what the axes plots: lines, and line/point collections."""
    for line in ax.lines:
        if line.get_visible() and len(line.get_xydata()):
            path = line.get_transform().transform_path(line.get_path())
            yield line, path
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        trans = coll.get_transform()
        offsets = coll.get_offsets()
        if len(offsets) and not coll.get_paths() or coll.__class__.__name__ == "PathCollection":
            for xy in coll.get_offset_transform().transform(offsets):   # scatter points
                from matplotlib.path import Path
                yield coll, Path([xy, xy + 0.5])
            continue
        for p in coll.get_paths():
            yield coll, trans.transform_path(p)


def _bars(ax: Axes) -> list[Bbox]:
    return [p.get_window_extent() for p in ax.patches
            if isinstance(p, Rectangle) and p.get_visible() and p.get_width() and p.get_height()]


def _is_ref_line(artist) -> bool:
    """Horizontal/vertical reference lines (chance, noise floor, zero) are the ones that strike labels."""
    if isinstance(artist, Line2D):
        xy = artist.get_xydata()
        return len(xy) >= 2 and (len(set(map(float, xy[:, 1]))) == 1 or len(set(map(float, xy[:, 0]))) == 1)
    return isinstance(artist, Collection) and artist.__class__.__name__ == "LineCollection"


def _tick_collisions(fig: Figure, ext: dict, title: str) -> list[str]:
    """Neighbouring horizontal tick labels of one axis closer than MIN_TICK_GAP (touching reads as one word)."""
    out = []
    for ax in fig.axes:
        for axis, lo, hi in ((ax.xaxis, "x0", "x1"), (ax.yaxis, "y0", "y1")):
            labels = sorted((t for t in axis.get_ticklabels() if t in ext and abs(t.get_rotation() % 180) < 1e-6),
                            key=lambda t: getattr(ext[t], lo))
            for a, b in zip(labels, labels[1:]):
                gap = getattr(ext[b], lo) - getattr(ext[a], hi)
                if gap < MIN_TICK_GAP:
                    out.append(f"{title}: tick labels {_name(a)} and {_name(b)} collide ({gap:.1f} px apart)")
    return out


def _covers(over, under) -> bool:
    """Whether `over`, drawn on top through the same points, leaves nothing of `under` to see: no rim of a
    wider line, no line where `over` draws markers only, no marker larger than `over`'s."""
    def line(ln) -> bool:
        return ln.get_linestyle() not in ("None", "", " ") and ln.get_linewidth() > 0

    def marker(ln) -> bool:
        return ln.get_marker() not in (None, "None", "", " ") and ln.get_markersize() > 0

    if line(under) and (not line(over) or under.get_linewidth() >= over.get_linewidth() + HALO_PT):
        return False
    return not marker(under) or (marker(over) and over.get_markersize() >= under.get_markersize() - HALO_PT)


def _hidden_series(fig: Figure, title: str) -> list[str]:
    """A labelled line drawn under a later one through the same points that covers it (`_covers`): the
    reader sees one series where the legend promises two."""
    out = []
    for ax in fig.axes:
        lines = [ln for ln in ax.lines if ln.get_visible() and len(ln.get_xydata())
                 and not str(ln.get_label()).startswith("_")]
        order = sorted(range(len(lines)), key=lambda i: (lines[i].get_zorder(), i))
        pts = {i: lines[i].get_transform().transform(lines[i].get_xydata()) for i in order}
        for pos, i in enumerate(order):
            for j in order[pos + 1:]:
                under, over = lines[i], lines[j]
                if not _covers(over, under):
                    continue
                dist = np.sqrt(((pts[i][:, None, :] - pts[j][None, :, :]) ** 2).sum(-1)).min(axis=1)
                if float(dist.max()) <= HIDE_PX:
                    out.append(f"{title}: series {under.get_label()!r} is hidden under {over.get_label()!r}")
                    break
    return out


def bar_table(fig: Figure) -> dict[str, dict[str, float]]:
    """{series: {category: height}} of the labelled vertical bar groups (what a caption's claims are read against)."""
    table: dict[str, dict[str, float]] = {}
    for ax in fig.axes:
        ticks = [(float(loc), t.get_text()) for loc, t in zip(ax.get_xticks(), ax.get_xticklabels())]
        for c in ax.containers:
            if not isinstance(c, BarContainer) or str(c.get_label()).startswith("_") or not ticks:
                continue
            for rect in c.patches:
                x = rect.get_x() + rect.get_width() / 2
                cat = min(ticks, key=lambda tk: abs(tk[0] - x))[1]
                table.setdefault(str(c.get_label()), {})[cat] = float(rect.get_height())
    return table


_LEADS = re.compile(r"(\S+) leads on ([^.;]+)")


def caption_problems(caption: str, bars: dict[str, dict[str, float]]) -> list[str]:
    """A caption's "X leads on A, B and C" read against the drawn bars: X must be strictly highest in each."""
    out = []
    for m in _LEADS.finditer(caption):
        name = m.group(1)
        for cat in (c.strip() for c in re.split(r",|\band\b", m.group(2)) if c.strip()):
            mine = bars.get(name, {}).get(cat)
            if mine is None:
                continue
            rivals = sorted(s for s, t in bars.items() if s != name and t.get(cat, float("-inf")) >= mine - 1e-9)
            if rivals:
                out.append(f"caption says {name} leads on {cat!r}, but {', '.join(rivals)} reach(es) {mine:.3g} there too")
    return out


def figure_problems(fig: Figure, boxes: bool = False) -> list[str]:
    """Everything a reader would call a layout defect, one line each; empty when the figure is clean.

    - a text cut off at the figure edge;
    - two texts overlapping (horizontal texts only; rotated ones are checked for the edge alone), and
      neighbouring tick labels closer than MIN_TICK_GAP;
    - a labelled series drawn under another through the same points;
    - a legend covering plotted data (bars, line vertices and segments, points);
    - a text inside an axes struck through by a reference line (axhline, hlines) or covering a bar;
    - with `boxes`: a text not inside the box patch it is drawn in (diagrams).
    """
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    title = _title(fig)
    page = fig.bbox
    texts = _visible_texts(fig)
    ext = {t: t.get_window_extent(r) for t in texts}
    out: list[str] = []
    for t in texts:
        b = ext[t]
        if b.x0 < page.x0 - TOL or b.y0 < page.y0 - TOL or b.x1 > page.x1 + TOL or b.y1 > page.y1 + TOL:
            out.append(f"{title}: text {_name(t)} is cut off at the figure edge")
    flat = [t for t in texts if abs(t.get_rotation() % 180) < 1e-6]
    for a, b in combinations(flat, 2):
        if _overlap(ext[a], ext[b]):
            out.append(f"{title}: text {_name(a)} overlaps text {_name(b)}")
    out += _tick_collisions(fig, ext, title) + _hidden_series(fig, title)
    legends = [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend() is not None] + \
              [(None, lg) for lg in fig.legends]
    for owner, lg in legends:
        lb = lg.get_window_extent(r)
        for ax in ([owner] if owner is not None else fig.axes):
            if any(_overlap(lb, bar) for bar in _bars(ax)):
                out.append(f"{title}: legend covers bars of '{ax.get_title() or 'axes'}'")
            if any(path.intersects_bbox(lb, filled=False) for _, path in _data_paths(ax)):
                out.append(f"{title}: legend covers plotted data of '{ax.get_title() or 'axes'}'")
    for ax in fig.axes:
        own = [t for t in ax.texts if t in ext]
        refs = [path for art, path in _data_paths(ax) if _is_ref_line(art)]
        for t in own:
            inner = _shrink(ext[t], 1.5)
            if any(path.intersects_bbox(inner, filled=False) for path in refs):
                out.append(f"{title}: text {_name(t)} is struck through by a reference line")
    if boxes:
        frames = [p.get_window_extent(r) for ax in fig.axes for p in ax.patches if isinstance(p, FancyBboxPatch)]
        for ax in fig.axes:
            for p in ax.patches:
                if not isinstance(p, FancyBboxPatch):
                    continue
                rim = p.get_linewidth() * fig.dpi / 72 / 2        # the stroke reaches half its width outside the path
                b = p.get_window_extent(r)
                b = Bbox.from_extents(b.x0 - rim, b.y0 - rim, b.x1 + rim, b.y1 + rim)
                if not (ax.bbox.x0 - TOL <= b.x0 and b.x1 <= ax.bbox.x1 + TOL
                        and ax.bbox.y0 - TOL <= b.y0 and b.y1 <= ax.bbox.y1 + TOL):
                    names = [t.get_text() for t in ax.texts if t in ext and p.get_window_extent(r).contains(
                        *ext[t].get_points().mean(axis=0)) and t.get_weight() == "bold"]
                    out.append(f"{title}: box {names[0]!r} is cut off at the drawing's edge" if names
                               else f"{title}: a box is cut off at the drawing's edge")
        for t in (t for ax in fig.axes for t in ax.texts):
            b = ext.get(t)
            if b is None:
                continue
            cx, cy = (b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2
            home = [f for f in frames if f.contains(cx, cy)]
            if home and not any(f.x0 - TOL <= b.x0 and b.x1 <= f.x1 + TOL and f.y0 - TOL <= b.y0 and b.y1 <= f.y1 + TOL
                                for f in home):
                out.append(f"{title}: text {_name(t)} overflows its box")
    return list(dict.fromkeys(out))


def legend_of(fig: Figure) -> list[Legend]:
    """All legends of a figure (axes and figure level), for tests."""
    return [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)

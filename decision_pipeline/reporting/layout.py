"""Layout checks for a drawn matplotlib figure: the defects a reader sees, found by geometry.

Why at build time: a cut-off legend, two labels printed over each other, a value
label struck through by a reference line, or a legend covering bars cannot be
spotted in the JSON behind a figure and pass every numeric test. Each check
works on the drawn figure's display boxes (the same ones the PNG shows), so
the report build and the tests can list them in words ('figure X: text "0.52"
overlaps text "0.36"') instead of a person paging through the PDF.
"""
from __future__ import annotations

from itertools import combinations

from matplotlib.axes import Axes
from matplotlib.collections import Collection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox

TOL = 1.0          # pixels of overlap tolerated (antialiasing, rounding)


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


def figure_problems(fig: Figure, boxes: bool = False) -> list[str]:
    """Everything a reader would call a layout defect, one line each; empty when the figure is clean.

    - a text cut off at the figure edge;
    - two texts overlapping (horizontal texts only; rotated ones are checked for the edge alone);
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
                b = p.get_window_extent(r)
                if isinstance(p, FancyBboxPatch) and not (ax.bbox.x0 - TOL <= b.x0 and b.x1 <= ax.bbox.x1 + TOL
                                                          and ax.bbox.y0 - TOL <= b.y0 and b.y1 <= ax.bbox.y1 + TOL):
                    out.append(f"{title}: a box is cut off at the drawing's edge")
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

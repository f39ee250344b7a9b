"""How every figure the project draws looks: palettes, font sizes, resolutions, sizes, and the bare
Agg-canvas figure they are drawn on.

Why one module: the same settings (a DPI, the grid's alpha, the grey of an empty heatmap cell, the
Okabe-Ito blue) were typed into each figure module, so a change reached some figures and not others.
Four families of figures keep their own look here, each named for who draws it; a figure module
imports its family's settings and never types a colour, a font size for its rcParams or a DPI itself:

- the report (report/figures*.py): half an A4 page wide and high, the Okabe-Ito colour-blind-safe
  palette, small fonts, viridis for accuracy heatmaps;
- the stages (stage_figures.py: evaluate, sft, rl, cross_route): matplotlib's tab10 and larger fonts,
  each PNG read on its own;
- the review's offline `dvc plots diff` page (review/plots_diff.py): DVC's own colours per revision;
- the pipeline drawing (docs/dag.py, docs/dag.png).

Figures are bare `matplotlib.figure.Figure` objects on the Agg canvas, never pyplot: nothing depends
on a display or on global pyplot state, and stages may draw from worker processes. rcParams apply
while a figure is built and drawn (rc is read at artist creation), so every family sets them with
`matplotlib.rc_context` around both. Changing a value here changes tracked PNGs (plots/, docs/dag.png)
and the report: rerun `dvc repro` and `make dag`.
"""
from __future__ import annotations

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 110                 # the report, the plots diff and the DAG
GRID_ALPHA = 0.3          # every grid line, rcParams or ax.grid
BACKGROUND = "white"      # savefig facecolor where it is set (report, DAG)
EMPTY_CELL = "#e6e6e6"    # a heatmap cell without a value: grey, not a colour that reads as a value
HEATMAP = "viridis"       # accuracy heatmaps (0..1)

# Okabe & Ito (2008): distinguishable under the common colour-vision deficiencies
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

# the report (report/figures*.py)
REPORT_WIDTH, REPORT_HEIGHT = 7.5, 4.0     # inches: full report width, half a page high
REPORT_RC = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8,
             "xtick.labelsize": 8, "ytick.labelsize": 8, "axes.spines.top": False, "axes.spines.right": False,
             "axes.grid": True, "grid.alpha": GRID_ALPHA, "axes.prop_cycle": matplotlib.cycler(color=OKABE_ITO)}

# the stages (stage_figures.py)
STAGE_DPI = 120
STAGE_RC = {"font.size": 11, "axes.titlesize": 13, "axes.labelsize": 11, "legend.fontsize": 9}

# the review's plots diff (review/plots_diff.py): DVC's colours for revisions a spec does not colour itself
DVC_PALETTE = ("#945dd6", "#13adc7", "#f46837", "#48aa68", "#4e79a7", "#e15759", "#b07aa1", "#9c755f")
MARKERS = "osD^vP*X"
REVIEW_SIZE = (8.5, 4.8)
REVIEW_RC = {"font.size": 10, "axes.titlesize": 11, "axes.grid": True, "grid.alpha": GRID_ALPHA, "legend.fontsize": 8}

# the pipeline drawing (docs/dag.py)
DAG_SIZE = (13, 6.6)
DAG_RC = {"font.size": 8}
DAG_BOX = {"fc": "#eef4fb", "ec": OKABE_ITO[0]}


def tab10(n: int) -> list:
    """n colours of matplotlib's tab10, repeating after ten (the stages' figures)."""
    cmap = matplotlib.colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def agg_figure(size: tuple[float, float], dpi: float, layout: str | None = None) -> Figure:
    """A bare figure with its Agg canvas attached (no pyplot state); `layout` as matplotlib's Figure takes it."""
    fig = Figure(figsize=size, dpi=dpi, layout=layout)
    FigureCanvasAgg(fig)
    return fig

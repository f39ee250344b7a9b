"""The offline `dvc plots diff` page: PNGs from a hand-made `--json` payload, and from real DVC in a throwaway repo.

Why: DVC's own page draws data plots with scripts from a CDN; the review folder must show them with no
network. The fixture mirrors `dvc plots diff main --json` as DVC 3.67 / dvc-render 1.0 prints it
(a `linear`/`smooth` spec with loess and a faint raw layer, data inline with a `rev` field per revision,
image plots as absolute paths under `-o`, errors as {name, rev, source, type, msg}).
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from decision_pipeline.reporting.review import plots_diff
from decision_pipeline.reporting.review.plots_diff import moving_average, parse_spec, render_page, series, window

from tests.pipeline.repo_copy import run

WS, MAIN = "#945dd6", "#13adc7"     # DVC's colours for the first two revisions


def smooth_spec(rows: list[dict], x: str, y: str, split: str | None, title: str, x_title: str, y_title: str,
                revs: tuple[str, ...] = ("workspace", "main")) -> dict:
    """dvc-render 1.0's `linear` (= `smooth`) template filled the way DVC fills it."""
    enc_y = {"field": y, "type": "quantitative", "title": y_title, "scale": {"zero": False}}
    enc_x = {"field": x, "type": "quantitative", "title": x_title}
    group = ["rev", split] if split else ["rev"]
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json", "data": {"values": rows},
        "title": {"text": title, "anchor": "middle"}, "width": 300, "height": 300,
        "params": [{"name": "smooth", "value": 0.001, "bind": {"input": "range", "min": 0.001, "max": 1}}],
        "encoding": {"x": enc_x, "color": {"field": "rev", "scale": {"domain": list(revs),
                                                                     "range": [WS, MAIN][:len(revs)]}},
                     "strokeDash": ({"field": split, "scale": {"domain": sorted({r[split] for r in rows}),
                                                               "range": [[1, 0], [8, 8]]}} if split else {})},
        "layer": [
            {"layer": [{"params": [{"name": "grid", "select": "interval", "bind": "scales"}], "mark": "line"},
                       {"transform": [{"filter": {"param": "hover", "empty": False}}], "mark": "point"}],
             "encoding": {"y": enc_y, "color": {"field": "rev", "type": "nominal"}},
             "transform": [{"loess": y, "on": x, "groupby": group, "bandwidth": {"signal": "smooth"}}]},
            {"mark": {"type": "line", "opacity": 0.2}, "encoding": {"x": enc_x, "y": enc_y}},
            {"mark": {"type": "circle", "size": 10},
             "encoding": {"x": {**enc_x, "aggregate": "max"}, "y": {**enc_y, "aggregate": {"argmax": x}}}},
        ]}


def loss_rows(n: int = 200) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for rev, scale in (("workspace", 1.0), ("main", 1.3)):
        for fld, base in (("chain_loss", 1.0), ("readout_loss", 0.4)):
            for s in range(n):
                v = round(base + scale * 3 * math.exp(-s / 40) + float(rng.normal(0, 0.1)), 5)
                rows.append({"step": s, fld: v, "dvc_inferred_y_value": v, "rev": rev, "field": fld})
    return rows


def simple_spec(rows: list[dict]) -> dict:
    """dvc-render's `simple` template: one line mark, no layers."""
    return {"data": {"values": rows}, "title": "routing", "mark": {"type": "line"},
            "encoding": {"x": {"field": "fraction", "type": "quantitative", "title": "share routed"},
                         "y": {"field": "accuracy", "type": "quantitative", "title": "accuracy (fraction)"},
                         "color": {"field": "rev", "scale": {"domain": ["workspace"], "range": [WS]}}}}


def png(path: Path, colour: str) -> str:
    """A small real PNG (what DVC copies into -o for an image plot)."""
    fig = Figure(figsize=(3, 2), dpi=60)
    FigureCanvasAgg(fig)
    fig.subplots().bar([0, 1], [1, 2], color=colour)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return str(path)


def missing(name: str, rev: str, source: str) -> dict:
    return {"name": name, "rev": rev, "source": source, "type": "FileNotFoundError",
            "msg": f"[Errno 2] No such file or directory: '{source}'"}


@pytest.fixture
def payload(tmp_path) -> dict:
    """What `dvc plots diff main --json -o <dir>` returns for a branch that added plots/rl/rounds.*."""
    dvc_out = tmp_path / "dvc_out"
    routing = [{"fraction": f / 10, "accuracy": 0.4 + f / 50, "rev": "workspace"} for f in range(11)]
    bar = {"data": {"values": [{"a": 1, "rev": "workspace"}]}, "mark": "bar",
           "encoding": {"x": {"field": "a"}, "y": {"field": "a"}}}
    return {
        "errors": [missing("rl_rounds", "main", "plots/rl/rounds.json"),
                   missing("plots/rl/rounds.png", "main", "plots/rl/rounds.png")],
        "data": {
            "sft_loss_parts": [{"type": "vega", "revisions": ["workspace", "main"],
                                "content": smooth_spec(loss_rows(), "step", "dvc_inferred_y_value", "field",
                                                       "Joint SFT loss per step", "optimizer step",
                                                       "training loss (nats/token)")}],
            "rl_rounds": [{"type": "vega", "revisions": ["workspace"],
                           "content": simple_spec(routing)}],
            "plots/evaluate/bars.json": [{"type": "vega", "revisions": ["workspace"], "content": bar}],
            "plots/sft/loss.png": [
                {"type": "image", "revisions": ["workspace"],
                 "url": png(dvc_out / "workspace_plots_sft_loss.png", WS)},
                {"type": "image", "revisions": ["main"], "url": png(dvc_out / "main_plots_sft_loss.png", MAIN)}],
            "plots/rl/rounds.png": [{"type": "image", "revisions": ["workspace"],
                                     "url": png(dvc_out / "workspace_plots_rl_rounds.png", WS)}],
        }}


def colour_pixels(img: np.ndarray, hex_colour: str, tol: float = 0.06) -> int:
    rgb = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return int((np.abs(img[..., :3] - rgb).max(axis=-1) < tol).sum())


def local_refs(page: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]*)"', page)


def test_spec_fields_titles_and_series_split():
    spec = parse_spec(smooth_spec(loss_rows(10), "step", "dvc_inferred_y_value", "field", "T", "optimizer step",
                                  "training loss"))
    assert (spec.x, spec.x_title, spec.y, spec.y_title, spec.title) == (
        "step", "optimizer step", "dvc_inferred_y_value", "training loss", "T")
    assert spec.split == ["rev", "field"] and spec.smooth and not spec.points
    assert spec.colors == {"workspace": WS, "main": MAIN} and spec.dashes == {"readout_loss": (8.0, 8.0)}
    groups, cats = series(spec, loss_rows(10))
    assert sorted(groups) == [("main", "chain_loss"), ("main", "readout_loss"), ("workspace", "chain_loss"),
                              ("workspace", "readout_loss")] and cats == []
    assert all(len(xs) == 10 and list(xs) == sorted(xs) for xs, _ in groups.values())
    plain = parse_spec(simple_spec([]))
    assert plain.split == ["rev"] and not plain.smooth and plain.y_title == "accuracy (fraction)"


def test_moving_average_is_centred_and_keeps_length():
    y = np.array([0.0, 0, 0, 6, 0, 0, 0])
    assert moving_average(y, 3).tolist() == [0, 0, 2, 2, 2, 0, 0]
    assert moving_average(np.ones(50), 9).tolist() == [1.0] * 50
    assert window(20) == 1 and window(200) == 11 and window(2000) == 101   # odd; none for short series


def test_page_from_json_payload(tmp_path, payload):
    out = tmp_path / "review" / "plots"
    (out / "data").mkdir(parents=True)
    (out / "data" / "stale.png").write_bytes(b"old")                     # a previous run's leftover
    page = render_page(payload, out, revs=["main", "workspace"])
    html = page.read_text()
    pngs = sorted(p.name for p in (out / "data").iterdir())
    assert pngs == ["00_sft_loss_parts.png", "01_rl_rounds.png"]         # one per drawable data plot, no stale
    loss = mpimg.imread(out / "data" / pngs[0])
    assert float(loss[..., :3].std()) > 0.05                             # not a blank canvas
    assert colour_pixels(loss, WS) > 300 and colour_pixels(loss, MAIN) > 300   # a line per revision
    assert colour_pixels(mpimg.imread(out / "data" / pngs[1]), WS) > 100
    # no external resources: nothing over http(s), no scripts, every reference a file in the folder
    assert "http://" not in html and "https://" not in html and "<script" not in html
    refs = local_refs(html)
    assert len(refs) == 5 and all((out / r).is_file() for r in refs)
    # image plots of both revisions side by side in one row, base first
    row = next(r for r in html.split("<tr>") if "<code>plots/sft/loss.png</code>" in r)
    assert re.findall(r'src="(images/[^/]+)/', row) == ["images/main", "images/workspace"]
    # DVC's errors are on the page: in the problem table and next to the plot missing in main
    assert "FileNotFoundError: [Errno 2] No such file or directory: &#x27;plots/rl/rounds.json&#x27;" in html
    rl_row = next(r for r in html.split("<tr>") if "<code>plots/rl/rounds.png</code>" in r)
    assert "missing in main: FileNotFoundError" in rl_row and rl_row.count("<img") == 1
    assert "missing in main: FileNotFoundError" in html.split("01_rl_rounds.png")[1].split("</figure>")[0]
    assert "plots/evaluate/bars.json" in html and "not drawn offline" in html   # a bar spec is listed, no crash


LONG_TITLE = "Pretraining loss per step, seed 0 of each selection (DVCLive, written while it trains)"


def test_a_long_title_beside_a_wide_legend_stays_on_the_page_and_the_checker_sees_the_old_cut(tmp_path):
    """Issue 54: the page's first plot had its title centred over an axes narrowed by a wide legend, so the
    title ran past the left edge. The checker finds that on the old layout; the new one draws it whole."""
    from decision_pipeline.reporting import style
    from decision_pipeline.reporting.layout import figure_problems

    rows = [{"step": s, "loss": 8 / (1 + s), "rev": rev, "filename": f"{arm}/plots/metrics/train/seed-0/loss.tsv"}
            for rev in ("workspace", "main") for arm in ("curated", "filtered_random", "random") for s in range(80)]
    content = smooth_spec(rows, "step", "loss", "filename", LONG_TITLE, "optimizer step", "training loss")
    _, problems = plots_diff.render_png("pretrain_live_loss", content, tmp_path / "new.png")
    assert problems == []
    with __import__("matplotlib").rc_context(style.REVIEW_RC):   # the old layout: the title on the axes
        fig = style.agg_figure(style.REVIEW_SIZE, style.DPI, layout="constrained")
        ax = fig.subplots()
        for arm in ("curated", "filtered_random", "random"):
            ax.plot(range(80), [8 / (1 + s) for s in range(80)], label=f"workspace · {arm}/plots/metrics/train/seed-0/loss.tsv")
        ax.set_title(LONG_TITLE)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        assert any("cut off at the figure edge" in p and "Pretraining loss" in p for p in figure_problems(fig))


def test_page_with_errors_only(tmp_path):
    page = render_page({"errors": [missing("loss", "main", "plots/loss.json")], "data": {"loss": []}},
                       tmp_path / "out", revs=["main", "workspace"])
    html = page.read_text()
    assert "plots/loss.json" in html and "Data plots (0)" in html and "Image plots (0)" in html


def test_real_dvc_plots_diff_json(tmp_path):
    """Two commits of a tiny plot file in a throwaway git+DVC repo, then the CLI (what `make review` runs)."""
    repo = tmp_path / "repo"
    (repo / "plots").mkdir(parents=True)
    (repo / "dvc.yaml").write_text(
        "plots:\n  - loss:\n      template: smooth\n      x: step\n      x_label: optimizer step\n"
        "      y_label: training loss\n      y:\n        plots/loss.json: loss\n"
        "  - plots/acc.json:\n      x: step\n      y: acc\n  - plots/fig.png\n")

    def write(scale: float, colour: str) -> None:
        rows = ",".join(f'{{"step": {s}, "loss": {3 * scale * math.exp(-s / 20) + 0.5:.4f}}}' for s in range(80))
        (repo / "plots" / "loss.json").write_text(f"[{rows}]")
        png(repo / "plots" / "fig.png", colour)

    run(["git", "init", "-q", "-b", "main"], repo)
    run([sys.executable, "-m", "dvc", "init", "-q"], repo)
    write(1.3, MAIN)
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "base"], repo)
    run(["git", "checkout", "-qb", "branch"], repo)
    write(1.0, WS)
    (repo / "plots" / "acc.json").write_text('[{"step": 0, "acc": 0.5}, {"step": 1, "acc": 0.6}]')  # not in main
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "lower loss, add acc"], repo)
    proc = run([sys.executable, "-m", "decision_pipeline", "plots-diff", "--base", "main",
                "--out", "review/plots"], repo)
    out = repo / "review" / "plots"
    assert Path(proc.stdout.strip()) == (out / "index.html").resolve()
    html = (out / "index.html").read_text()
    loss = mpimg.imread(next((out / "data").glob("*_loss.png")))
    assert colour_pixels(loss, WS) > 200 and colour_pixels(loss, MAIN) > 200   # both revisions drawn
    assert len(list((out / "data").glob("*_acc.png"))) == 1                     # drawn from workspace alone
    assert {p.parent.name for p in (out / "images").rglob("*.png")} == {"main", "workspace"}
    assert "http://" not in html and "https://" not in html
    assert all((out / r).is_file() for r in local_refs(html))
    assert "missing in main" in html and "plots/acc.json" in html and "FileNotFoundError" in html
    assert not (repo / "dvc_plots").exists()                                  # DVC's images went to a temp dir
    bad = run([sys.executable, "-m", "decision_pipeline", "plots-diff", "--base", "nope"], repo,
              check=False)
    assert bad.returncode == 2 and "dvc plots diff nope" in bad.stderr


def test_cli_is_what_review_calls(monkeypatch, tmp_path):
    """`make review` builds the page through plots_diff.build, not DVC's CDN page."""
    calls = []
    monkeypatch.setattr(plots_diff, "build", lambda base, out, cwd=None: calls.append((base, out)))
    from decision_pipeline.reporting.review import diff as review
    monkeypatch.setattr(review.subprocess, "run", lambda *a, **k: type("P", (), {"returncode": 0, "stdout": ""})())
    monkeypatch.chdir(tmp_path)
    assert review.main(["--base", "main", "--out", "rv"]) == 0
    assert calls == [("main", Path("rv/plots"))]
    assert "rv/plots/index.html" in (tmp_path / "rv" / "review.md").read_text()

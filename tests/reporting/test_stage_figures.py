"""Each plot function writes a real, non-trivial PNG atomically."""
import os

import matplotlib.image as mpimg
import numpy as np
import pytest
from matplotlib.figure import Figure

from decision_pipeline.common import stats
from decision_pipeline.reporting import stage_figures as plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path, min_side=300):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 5_000
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[2] in (3, 4)
    assert min(img.shape[:2]) >= min_side
    assert float(img[..., :3].std()) > 0.02          # not a blank canvas
    leftovers = [p.name for p in path.parent.iterdir() if p.name != path.name]
    assert leftovers == [], f"temp files left behind: {leftovers}"
    return img


def curve(readout, thinking, n=10):
    rows = []
    for f in np.linspace(0, 1, 21):
        acc = readout + (thinking - readout) * min(1.0, 1.6 * f)
        rows.append({"fraction": round(float(f), 6), "n_routed": int(round(f * n)), "accuracy": acc,
                     "mean_thinking_tokens": 300 * f, "readout_accuracy": readout, "thinking_accuracy": thinking})
    return rows


def test_routing_curve_png(tmp_path):
    out = tmp_path / "deep" / "dir" / "routing.png"     # parent directories are created
    ret = plots.plot_routing_curve({"small": curve(0.55, 0.8), "large": curve(0.7, 0.9)}, out)
    assert ret == out
    assert_png(out)


def test_routing_curve_from_metrics(tmp_path):
    from decision_pipeline.decision.evaluate import metrics
    qs = [{"id": f"q{i}", "task": "choice", "family": "A", "level": 0,
           "options": [{"id": "a"}, {"id": "b"}], "gold": "a"} for i in range(8)]
    logits = [np.array([0.1 * i, 0.0]) for i in range(8)]
    table = metrics.item_table(qs, logits, [0, 1, 0, None, 0, 0, 1, 0], list(range(10, 90, 10)),
                               ["stop"] * 8, [None] * 8)
    out = tmp_path / "r.png"
    plots.plot_routing_curve({"m": metrics.routing_curve(table)}, out)
    assert_png(out)


def test_reliability_png_accepts_bins_and_dicts(tmp_path):
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.3, 1.0, 400)
    rb = stats.reliability_bins(conf, rng.random(400) < conf, 10)
    rb2 = stats.reliability_bins(conf, rng.random(400) < conf ** 2, 10).to_dict()
    rb2["accuracy"][0] = None                              # empty-bin form from JSON
    out = tmp_path / "reliability.png"
    plots.plot_reliability({"tempered": rb, "raw": rb2}, out)
    assert_png(out)


def test_accuracy_grid_png_two_panels_and_single_key(tmp_path):
    rows = [{"family": fam, "level": lvl, "readout_accuracy": 0.9 - 0.15 * lvl,
             "thinking_accuracy": 0.95 - 0.05 * lvl, "n": 20}
            for fam in ("count", "keyword", "larger") for lvl in range(5) if (fam, lvl) != ("count", 4)]
    two = tmp_path / "grid.png"
    plots.plot_accuracy_grid(rows, two, "Accuracy grid")
    img_two = assert_png(two, min_side=200)
    single = [{"family": r["family"], "level": r["level"], "accuracy": r["readout_accuracy"], "n": r["n"]}
              for r in rows]
    one = tmp_path / "sub" / "grid1.png"
    plots.plot_accuracy_grid(single, one, "Readout accuracy")
    img_one = assert_png(one, min_side=200)
    assert img_two.shape[1] > img_one.shape[1]             # two panels are wider than one


def test_loss_curves_png(tmp_path):
    steps = range(0, 1000, 10)
    series = {"base": [{"step": s, "loss": 8 * np.exp(-s / 200) + 0.5} for s in steps],
              "sft": [{"step": s, "loss": 3 * np.exp(-s / 300) + 0.8} for s in steps]}
    out = tmp_path / "loss.png"
    plots.plot_loss_curves(series, out, "Loss")
    assert_png(out)


def test_overwrite_replaces_existing_file(tmp_path):
    out = tmp_path / "loss.png"
    out.write_bytes(b"old")
    plots.plot_loss_curves({"a": [{"step": 0, "loss": 2.0}, {"step": 1, "loss": 1.0}]}, out)
    assert_png(out)
    assert out.stat().st_mode & 0o044 == 0o044            # readable by others, not mkstemp's 0600


def test_failed_save_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    out = tmp_path / "loss.png"
    out.write_bytes(b"old")

    def boom(self, *a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Figure, "savefig", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        plots.plot_loss_curves({"a": [{"step": 0, "loss": 1.0}]}, out)
    assert out.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["loss.png"]


@pytest.mark.parametrize("call", [
    lambda p: plots.plot_routing_curve({}, p),
    lambda p: plots.plot_reliability({}, p),
    lambda p: plots.plot_accuracy_grid([], p, "t"),
    lambda p: plots.plot_loss_curves({}, p, "t"),
])
def test_empty_input_raises_and_writes_nothing(tmp_path, call):
    with pytest.raises(ValueError, match="empty"):
        call(tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()

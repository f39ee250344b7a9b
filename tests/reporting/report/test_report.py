"""The report builds from a fixture set of metrics; its shape follows the registry; bad input writes nothing."""
from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
import yaml
from PIL import Image, ImageStat

from decision_pipeline.common.dvcfiles import pipeline_files
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.report import pdf
from decision_pipeline.reporting.report.build import build_report, listings, make_plan, stages_of
from decision_pipeline.reporting.report.registry import expected_pages
from decision_pipeline.reporting.report.sources import Store
from stages import report as report_stage

OUT = ("report/report.pdf", "metrics/summary.json", "plots/report")


def build(root: Path) -> dict:
    return build_report(root, *OUT[:2], OUT[2], root / "params.yaml")


def pdf_counts(path: Path) -> tuple[int, int]:
    """Pages and embedded images (soft masks of RGBA PNGs are not images of their own)."""
    data = path.read_bytes()
    pages = len(re.findall(rb"/Type /Page[^s]", data))
    masks = set(re.findall(rb"/SMask (\d+) 0 R", data))      # identical alpha channels share one mask object
    images = len(re.findall(rb"/Subtype /Image", data)) - len(masks)
    return pages, images


def assert_nothing_written(root: Path) -> None:
    assert not (root / "report").exists() or list((root / "report").iterdir()) == []
    assert not (root / "metrics/summary.json").exists()
    assert not (root / "plots/report").exists()
    leftovers = [p for p in root.rglob(".*.tmp")]
    assert leftovers == []


def test_pdf_follows_the_registry(built):
    """`built` (conftest.py) is one timed build of the unchanged fixture tree, shared by the tests that only read it."""
    run_root, counts, seconds = built
    assert seconds < 30                                     # seconds, not minutes, even on a shared 2-core box
    plan = make_plan(Store(run_root))
    params = run_root / "params.yaml"
    want_pages = expected_pages(plan.figure_counts, pdf.appendix_pages(listings(run_root, params),
                                                                       len(stages_of(run_root, params))))
    pages, images = pdf_counts(run_root / "report/report.pdf")
    assert (pages, images) == (want_pages, sum(plan.figure_counts))
    assert counts["pages"] == want_pages and counts["figures"] == images
    assert [s.id for s, *_ in plan.active] == ["data", "curation", "chains_sft", "evaluation", "s1mb"]
    assert {s.id for s, _ in plan.skipped} == {"rl", "charter"}
    drawn = sorted(p.stem for p in (run_root / "plots/report").glob("*.png"))
    assert drawn == sorted(f.id for *_, figs in plan.active for f in figs if f.build)


def test_summary_is_flat_and_traceable(built):
    run_root, _, _ = built
    summary = json.loads((run_root / "metrics/summary.json").read_text())
    assert all(isinstance(v, (int, float)) or v is None for k, v in summary.items() if not k.endswith(("_noise_source", "_claim", "_verdict")))
    store = Store(run_root)
    for row in make_plan(store).rows:
        file, key = row.source.split(":", 1)
        assert summary[row.headline.name] == store.number(file, key)
    assert summary["sft_minus_base_readout_accuracy_ci_low"] > 0
    # no noise study in the fixture: the within-run half-range, labelled as such, with its seed count
    assert summary["curated_heldout_ppl_noise"] == store.number("metrics/pretrain/curated.json", "seeds.ppl_halfrange")
    assert summary["curated_heldout_ppl_noise_source"] == "within-run"
    assert summary["curated_heldout_ppl_noise_n"] == store.number("metrics/pretrain/curated.json", "seeds.n")


def test_page_one_renders_and_is_not_blank(built):
    import pypdfium2 as pdfium

    run_root, _, _ = built
    gray = pdfium.PdfDocument(str(run_root / "report/report.pdf"))[0].render(scale=40 / 72).to_pil().convert("L")
    dark = sum(gray.histogram()[:128]) / (gray.width * gray.height)
    assert ImageStat.Stat(gray).stddev[0] > 10 and dark > 0.01     # text on the page, not a white sheet


def test_absent_sections_are_skipped_and_optional_rl_activates(run_root):
    for p in (run_root / "metrics/s1mb").iterdir():
        p.unlink()
    (run_root / "metrics/rl.json").write_text(json.dumps({"reward_gain": {"diff": 0.4, "ci_low": 0.1, "ci_high": 0.7}}))
    (run_root / "plots/rl").mkdir(parents=True)
    (run_root / "plots/rl/rounds.json").write_text(json.dumps(
        [{"step": i, "reward_mean": 0.1 * i, "unfinished_share": 0.5 - 0.04 * i, "completion_tokens": 40 - i, "kl": 0.0}
         for i in range(10)]))
    counts = build(run_root)
    plan = make_plan(Store(run_root))
    assert "s1mb" in {s.id for s, _ in plan.skipped} and "rl" in [s.id for s, *_ in plan.active]
    names = {r.headline.name for r in plan.rows}
    assert "rl_reward_gain" in names and "rl_minus_sft_thinking_accuracy" not in names   # guarded: file absent
    rl_figs = next(figs for s, _, _, figs in plan.active if s.id == "rl")
    assert [f.id for f in rl_figs] == ["rl_rounds"] and (run_root / "plots/report/rl_rounds.png").is_file()
    assert pdf_counts(run_root / "report/report.pdf") == (counts["pages"], counts["figures"])


def _drop_key(root: Path) -> str:
    data = json.loads((root / "metrics/evaluate/sft.json").read_text())
    del data["vs_base"]
    (root / "metrics/evaluate/sft.json").write_text(json.dumps(data))
    return "metrics/evaluate/sft.json: key 'vs_base.readout_accuracy"


def _nan(root: Path) -> str:
    path = root / "metrics/pretrain/curated.json"
    path.write_text(path.read_text().replace('"ppl_mean": 7.7977', '"ppl_mean": NaN'))
    return "metrics/pretrain/curated.json: key 'seeds.ppl_mean' is nan"


def _no_rows(root: Path) -> str:
    (root / "plots/pretrain/random_loss.json").write_text("[]\n")
    return "plots/pretrain/random_loss.json: plot data file has no rows"


def _bad_image(root: Path) -> str:
    (root / "plots/evaluate/sft/reliability.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    return "plots/evaluate/sft/reliability.png: unreadable image"


def _missing_row_key(root: Path) -> str:
    path = root / "plots/evaluate/base/routing.json"
    rows = json.loads(path.read_text())
    del rows[3]["mean_thinking_tokens"]
    path.write_text(json.dumps(rows))
    return "plots/evaluate/base/routing.json: row 3 has no key 'mean_thinking_tokens'"


def _plot_nan(root: Path) -> str:
    path = root / "plots/evaluate/base/routing.json"
    rows = json.loads(path.read_text())
    rows[2]["accuracy"] = float("nan")
    path.write_text(json.dumps(rows))           # json writes NaN, as a buggy stage would
    return "plots/evaluate/base/routing.json: row 2 key 'accuracy' is nan"


@pytest.mark.parametrize("corrupt", [_drop_key, _nan, _no_rows, _bad_image, _plot_nan],
                         ids=["missing-key", "nan", "no-rows", "unreadable-image", "plot-nan"])
def test_bad_input_is_one_clear_error_and_nothing_is_written(run_root, corrupt):
    expected = corrupt(run_root)
    with pytest.raises(PipelineError) as info:
        build(run_root)
    assert expected in str(info.value) and "\n" not in str(info.value)
    assert_nothing_written(run_root)


def test_a_figure_whose_keys_are_missing_is_marked_not_a_crash(run_root):
    """Metrics lacking a figure's keys: that figure becomes a marked placeholder naming file and key."""
    _missing_row_key(run_root)
    counts = build(run_root)
    assert counts["figures_not_drawn"] == 1
    plan_figs = {f.id for _s, _t, _r, figs in make_plan(Store(run_root)).active for f in figs}
    assert "eval_routing" in plan_figs and (run_root / "plots/report/eval_routing.png").is_file()
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(run_root / "report/report.pdf"))
    text = " ".join(doc[i].get_textpage().get_text_range() for i in range(len(doc)))
    assert "Not drawn: plots/evaluate/base/routing.json: row 3 has no key 'mean_thinking_tokens'" in " ".join(text.split())


def test_stage_entry_exits_2_with_one_line(run_root, capsys):
    _drop_key(run_root)
    code = report_stage.main(["--root", str(run_root), "--params", str(run_root / "params.yaml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "vs_base.readout_accuracy" in err[0]
    assert_nothing_written(run_root)


def test_a_failed_rebuild_keeps_the_previous_complete_outputs(built, tmp_path):
    run_root = tmp_path / "run"
    shutil.copytree(built[0], run_root)                     # a complete build's outputs, as a rebuild finds them
    before = (run_root / "report/report.pdf").read_bytes()
    _nan(run_root)
    with pytest.raises(PipelineError):
        build(run_root)
    assert (run_root / "report/report.pdf").read_bytes() == before
    assert sorted(p.name for p in (run_root / "report").iterdir()) == ["report.pdf"]


def test_appendix_lists_every_stage_and_every_params_line(run_root):
    [(title_a, params_lines)] = listings(run_root, run_root / "params.yaml")
    assert params_lines == (run_root / "params.yaml").read_text().splitlines()
    files = pipeline_files(run_root)
    assert len(files) == 3   # the root dvc.yaml and the parts pipelines/charter/, pipelines/curation/
    stages = [name for f in files for name in yaml.safe_load(f.read_text())["stages"]]
    rows = stages_of(run_root, run_root / "params.yaml")
    assert [name.split("@")[0] for name, _ in rows] == stages
    assert {"reviews", "pretrain", "report"} <= set(stages)
    assert all("${" not in desc for _, desc in rows)
    per_page = pdf.LINES_PER_PAGE * pdf.COLUMNS
    assert pdf.appendix_pages([("x", ["y"] * (per_page + 1))]) == 2
    assert pdf.appendix_pages([("x", ["y"])], stages=pdf.STAGES_PER_PAGE + 1) == 3
    assert all(len(line) <= pdf.COL_CHARS for line in pdf.wrap_lines(["z" * 300], pdf.COL_CHARS))
    assert math.isclose(pdf.SLOT_H * 2 + pdf.GAP, pdf.FRAME_H - 8)


def test_optional_annotation_section_activates_with_its_figures(run_root):
    (run_root / "metrics/charter").mkdir(parents=True)
    (run_root / "metrics/charter/judge_agreement.json").write_text(
        json.dumps({"kappa": 0.55, "ci_low": 0.4, "ci_high": 0.7, "kappa_spread": 0.1, "n": 30}))
    (run_root / "metrics/charter/ranking.json").write_text(json.dumps({"order": ["cites", "summarises"]}))
    (run_root / "plots/charter").mkdir(parents=True)
    Image.new("RGB", (400, 300), "steelblue").save(run_root / "plots/charter/cost_vs_quality.png")
    counts = build(run_root)
    plan = make_plan(Store(run_root))
    charter = next((s, text, rows, figs) for s, text, rows, figs in plan.active if s.id == "charter")
    assert [r.headline.name for r in charter[2]] == ["charter_judge_kappa"] and charter[2][0].lo == 0.4
    assert "cites > summarises" in charter[1][0] and len(charter[3]) == 1
    assert pdf_counts(run_root / "report/report.pdf") == (counts["pages"], counts["figures"])

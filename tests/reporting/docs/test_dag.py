"""docs/dag.png is current: every dvc.yaml stage has a family, and the recorded stage/edge digest is today's."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from PIL import Image

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.docs import dag

ROOT = Path(__file__).resolve().parents[3]


def test_families_cover_exactly_the_stages_of_dvc_yaml():
    declared = set(dag.yaml_stages(ROOT))
    mapped = [n for names in dag.FAMILIES.values() for n in names]
    assert len(mapped) == len(set(mapped)), "a stage is in two families"
    assert declared - set(mapped) == set(), "stages without a family: add them to dag.FAMILIES, then make dag"
    assert set(mapped) - declared == set(), "families list stages dvc.yaml no longer has"
    assert set(dag.POSITIONS) == set(dag.FAMILIES) == set(dag.WHAT)


def test_committed_picture_matches_the_pipeline_today():
    record = json.loads((ROOT / "docs/dag.json").read_text())
    stages, edges = dag.dvc_graph(ROOT)
    assert record["digest"] == dag.digest(stages, edges), "docs/dag.png is stale: run `make dag` and commit docs/dag.*"
    assert record["stages"] == stages and [tuple(e) for e in record["edges"]] == edges
    with Image.open(ROOT / "docs/dag.png") as img:
        assert img.info.get("Comment") == record["digest"]      # the image was drawn from this record


def test_unmapped_stage_is_one_line_naming_it():
    with pytest.raises(PipelineError) as info:
        dag.family_of("brand_new@x")
    assert "'brand_new'" in str(info.value) and "\n" not in str(info.value)


def test_family_edges_and_summary(tmp_path):
    stages = ["items", "ingest", "curate@a", "curate@b", "pretrain@a", "report"]
    edges = [("items", "curate@a"), ("ingest", "curate@a"), ("ingest", "curate@b"), ("curate@a", "pretrain@a"),
             ("pretrain@a", "report"), ("items", "ingest")]
    fam = dag.family_edges(edges)
    assert fam == {("data", "curation"): 3, ("curation", "pretraining"): 1, ("pretraining", "report"): 1}
    assert dag.stage_summary(stages, "curation") == ["curate \u00d72"]
    out = dag.draw(stages, edges, tmp_path / "d.png", "sha256:test")     # raises on a layout problem
    with Image.open(out) as img:
        assert img.info["Comment"] == "sha256:test" and img.width > 1000


def test_the_committed_pipeline_fits_the_drawing_and_the_old_fixed_range_clipped_annotation(tmp_path):
    """Issue 54: with nine annotation stages the box's top ran past the fixed y range (3.4) and its border was
    cut; the range now fits every box, and the checker (box stroke included) names the box that is cut."""
    record = json.loads((ROOT / "docs/dag.json").read_text())
    stages, edges = record["stages"], [tuple(e) for e in record["edges"]]
    dag.draw(stages, edges, tmp_path / "now.png", "sha256:test")            # raises on a layout problem
    (_, _), (lo, hi) = dag.limits({fam: dag.stage_summary(stages, fam) for fam in dag.POSITIONS})
    assert hi > 3.4
    with pytest.raises(PipelineError, match="box 'annotation' is cut off at the drawing's edge"):
        dag.draw(stages, edges, tmp_path / "old.png", "sha256:test", ylim=(-2.2, 3.4))

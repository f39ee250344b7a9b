"""External inputs named in params are DVC deps of their stages, so editing one reruns the stage.

Why: `items.external` and friends point at files outside the pipeline's outputs; if
they were only params, `dvc status` would call the stage up to date after the file
changed. "No file" is the committed placeholder `configs/external/none` (DVC cannot
track an empty path), which the params loader reads as ''.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.codedeps import pipeline_stages
from decision_pipeline.common.params import NO_PATH, load_section
from decision_pipeline.questions.splits import ItemsParams

from tests.pipeline.repo_copy import ROOT, copy_repo, run
from decision_pipeline.common.profiles import merged_profile, profile_names

# stage -> the params keys naming its external inputs
EXTERNAL = {"items": ("items.external",), "ingest": ("ingest.external_pool", "ingest.external_dev"),
            "base_model": ("base_model.path",), "s1mb_data": ("s1mb_data.local_dir",)}
PROFILES = profile_names(ROOT)


def _value(params: dict, dotted: str) -> object:
    section, key = dotted.split(".")
    return params[section][key]


def test_every_external_path_is_a_dep_of_its_stage():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    deps = {s.name: s.deps for s in pipeline_stages(ROOT)}
    for stage, keys in EXTERNAL.items():
        for key in keys:
            assert _value(params, key) in deps[stage], f"{key} is not a dep of stage {stage}"


@pytest.mark.parametrize("name", PROFILES)
def test_profiles_never_write_an_empty_external_path(name):
    """'' would make `dvc repro` fail with DVC's bare "unexpected error": none is the placeholder."""
    params = merged_profile(name, ROOT)
    empty = [k for keys in EXTERNAL.values() for k in keys if not _value(params, k)]
    assert not empty, f"{name}: {empty} are empty; write {NO_PATH} for none"


def test_placeholder_is_committed_and_reads_as_none(tmp_path):
    # not empty: DVC warns "'configs/external/none' is empty" on every repro otherwise
    assert (ROOT / NO_PATH).is_file() and (ROOT / NO_PATH).stat().st_size > 0
    params = merged_profile("micro", ROOT)
    for value in (NO_PATH, f"./{NO_PATH}"):
        params["items"]["external"] = value
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
        assert load_section(ItemsParams, "items", tmp_path / "params.yaml").external == ""


def _status(repo: Path, stage: str) -> dict:
    return json.loads(run(["dvc", "status", stage, "--json"], repo).stdout or "{}")


@pytest.mark.slow
def test_editing_the_external_questions_file_marks_items_changed(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    run(["dvc", "repro", "items"], repo)  # the placeholder is a dep DVC can track
    assert _status(repo, "items") == {}
    questions = repo / "ext" / "questions.jsonl"
    questions.parent.mkdir()
    row = {"id": "ext-1", "task": "choice", "question": "Which is larger, 3 or 5?", "gold": "b",
           "options": [{"id": "a", "text": "3"}, {"id": "b", "text": "5"}]}
    questions.write_text(json.dumps(row) + "\n")
    run(["dvc", "exp", "run", "-S", "items.external=ext/questions.jsonl", "items"], repo)
    assert yaml.safe_load((repo / "params.yaml").read_text())["items"]["external"] == "ext/questions.jsonl"
    assert json.loads((repo / "metrics" / "items.json").read_text())["families"]["external"] == 1
    assert _status(repo, "items") == {}
    questions.write_text(json.dumps({**row, "question": "Which is larger, 4 or 5?"}) + "\n")
    assert _status(repo, "items") == {"items": [{"changed deps": {"ext/questions.jsonl": "modified"}}]}

"""Every profile (default, micro, gpu: overlays merged over params.yaml) loads through the stages'
typed loaders and sets every key; overlays hold only differences and `apply` refuses to clobber edits."""
import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import SECTION_NAMES
from decision_pipeline.common.profiles import apply, dump, merge, merged_profile, overlay_of, profile_names
from decision_pipeline.config import SECTIONS, load_all

ROOT = Path(__file__).resolve().parents[2]
PROFILES = profile_names(ROOT)


@pytest.fixture(params=PROFILES)
def merged(request, tmp_path) -> tuple[str, Path, dict]:
    """(name, a params file holding the merged profile, its data)."""
    data = merged_profile(request.param, ROOT)
    path = tmp_path / "params.yaml"
    path.write_text(dump(data))
    return request.param, path, data


def test_profile_loads_every_section(merged):
    name, path, data = merged
    assert set(data) == set(SECTIONS), f"{name}: sections differ from the stages"
    loaded = load_all(path)
    assert set(loaded) == set(SECTIONS)


def _unset_fields(cls, raw: dict, prefix: str) -> list[str]:
    """Fields of `cls` (recursing into nested config classes) that `raw` leaves to a code default."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}"
        if f.name not in raw:
            out.append(key)
        elif dataclasses.is_dataclass(hints[f.name]) and isinstance(raw[f.name], dict):
            out += _unset_fields(hints[f.name], raw[f.name], key)
    return out


def test_no_field_falls_back_to_a_code_default(merged):
    """A knob that exists in code must be written in params.yaml: a silent default hides a
    disagreement between params.yaml and the library."""
    profile, _, data = merged
    unset = [k for name, cls in SECTIONS.items() for k in _unset_fields(cls, data.get(name, {}), name)]
    assert not unset, f"{profile} leaves {unset} to code defaults; write them out"


def test_config_classes_document_every_field():
    for name, cls in SECTIONS.items():
        undocumented = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("doc")]
        assert not undocumented, f"section {name} ({cls.__name__}): fields without doc= help text: {undocumented}"


def test_section_names_every_stage_checks_match_the_config_index():
    """Stages check a file's sections against SECTION_NAMES (cheap: no config class imported)."""
    assert SECTION_NAMES == tuple(SECTIONS)


def test_unknown_section_is_one_clear_error(tmp_path):
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["sft_typo"] = {"lr": 1}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PipelineError, match="section 'sft_typo' is unknown"):
        load_all(path)


@pytest.mark.parametrize("name", PROFILES[1:])
def test_overlays_hold_only_differences(name):
    """An overlay line equal to params.yaml is a second home for that knob (it would drift)."""
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    overlay = yaml.safe_load((ROOT / "profiles" / f"{name}.yaml").read_text())
    assert overlay == overlay_of(base, merge(base, overlay)), f"profiles/{name}.yaml repeats values of params.yaml"


def test_merge_drops_null_entries_and_refuses_unknown_sections(tmp_path):
    base = {"a": {"x": 1, "y": {"k": 2}}, "b": {"c1": {"v": 1}, "c2": {"v": 2}}}
    assert merge(base, {"a": {"y": {"k": 3}}, "b": {"c2": None}}) == {"a": {"x": 1, "y": {"k": 3}}, "b": {"c1": {"v": 1}}}
    (tmp_path / "profiles").mkdir()
    (tmp_path / "params.yaml").write_text("a: {x: 1}\n")
    (tmp_path / "profiles" / "typo.yaml").write_text("aa: {x: 2}\n")
    with pytest.raises(PipelineError, match=r"typo.yaml: section 'aa' is not in params.yaml"):
        merged_profile("typo", tmp_path)


def _git_repo(tmp_path: Path) -> Path:
    import shutil
    import subprocess
    shutil.copy2(ROOT / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": __import__("os").environ["PATH"]}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, env=env)
    return tmp_path


def test_apply_switches_profiles_and_back_without_touching_other_lines(tmp_path):
    repo = _git_repo(tmp_path)
    committed = (repo / "params.yaml").read_text()
    apply("micro", repo)
    assert yaml.safe_load((repo / "params.yaml").read_text()) == merged_profile("micro", ROOT)
    apply("gpu", repo)  # from one profile to another: not an edit of yours
    assert yaml.safe_load((repo / "params.yaml").read_text())["base"]["profile"] == "gpu"
    apply("default", repo)
    assert (repo / "params.yaml").read_text() == committed


def test_apply_refuses_to_overwrite_local_edits(tmp_path):
    repo = _git_repo(tmp_path)
    edited = (repo / "params.yaml").read_text().replace("lr: 0.002", "lr: 0.0025", 1)
    assert edited != (repo / "params.yaml").read_text()
    (repo / "params.yaml").write_text(edited)
    with pytest.raises(PipelineError, match="holds edits that are not a profile"):
        apply("gpu", repo)
    assert (repo / "params.yaml").read_text() == edited  # nothing written
    apply("gpu", repo, force=True)
    assert yaml.safe_load((repo / "params.yaml").read_text())["base"]["profile"] == "gpu"


def test_dvc_stages_match_modules():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    modules = {p.stem for p in (ROOT / "stages").glob("*.py") if p.stem != "__init__"}
    assert set(stages) == modules
    for name, stage in stages.items():
        cmd = stage.get("do", stage)["cmd"]
        assert cmd.startswith(f"python -m stages.{name}"), name

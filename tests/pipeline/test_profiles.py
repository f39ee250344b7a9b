"""Every params file (default, micro, gpu) loads through the stages' typed loaders, and sets every key."""
import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import SECTION_NAMES
from decision_pipeline.config import SECTIONS, load_all

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "params.yaml", *sorted((ROOT / "profiles").glob("*.yaml"))]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_profile_loads_every_section(path):
    data = yaml.safe_load(path.read_text())
    assert set(data) == set(SECTIONS), f"{path.name}: sections differ from the stages"
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


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_field_falls_back_to_a_code_default(path):
    """A knob that exists in code must be written in every profile: a silent default hides a
    disagreement between params.yaml and the library."""
    data = yaml.safe_load(path.read_text())
    unset = [k for name, cls in SECTIONS.items() for k in _unset_fields(cls, data.get(name, {}), name)]
    assert not unset, f"{path.name} leaves {unset} to code defaults; write them out"


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


@pytest.mark.parametrize("path", FILES[1:], ids=lambda p: p.name)
def test_profiles_have_the_same_keys_as_params(path):
    def keys(d, prefix=""):
        out = set()
        for k, v in d.items():
            out.add(prefix + k)
            if isinstance(v, dict) and k not in ("filters", "splits", "register_weights", "candidates"):
                out |= keys(v, prefix + k + ".")
        return out
    assert keys(yaml.safe_load(path.read_text())) == keys(yaml.safe_load((ROOT / "params.yaml").read_text()))


def test_dvc_stages_match_modules():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    modules = {p.stem for p in (ROOT / "stages").glob("*.py") if p.stem != "__init__"}
    assert set(stages) == modules
    for name, stage in stages.items():
        cmd = stage.get("do", stage)["cmd"]
        assert cmd.startswith(f"python -m stages.{name}"), name

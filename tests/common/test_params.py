"""Tests for decision_pipeline.common.params: typed, validated loading of params.yaml sections."""
from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Optional

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import (
    BaseParams,
    from_dict,
    load_base,
    load_section,
    read_params_file,
    rule,
)
from decision_pipeline.common.params import shown as shown_key


# Dataclasses live at module level so `typing.get_type_hints` can resolve the
# (string) annotations created by `from __future__ import annotations`.
@dataclasses.dataclass
class Optim:
    lr: float = rule(min=0.0, max=1.0)
    schedule: str = rule(choices=("cosine", "linear"), default="cosine")


@dataclasses.dataclass
class Train:
    steps: int = rule(min=1, max=1000)
    shuffle: bool
    name: str
    splits: list[str] = rule(choices=("pool", "dev", "eval"))
    weights: dict[str, float]
    optim: Optim
    limit: Optional[int] = rule(min=0, default=None)
    warmup: float = rule(min=0.0, default=0.5)
    tags: list[str] = rule(default_factory=list)


@dataclasses.dataclass
class Outer:
    inner: Train


GOOD = {
    "steps": 10,
    "shuffle": True,
    "name": "run-a",
    "splits": ["pool", "dev"],
    "weights": {"a": 0.25, "b": 1},
    "optim": {"lr": 0.01, "schedule": "linear"},
}

GOOD_YAML = """\
base:
  seed: 7
  profile: default
train:
  steps: 10
  shuffle: true
  name: run-a
  splits: [pool, dev]
  weights:
    a: 0.25
    b: 1
  optim:
    lr: 0.01
    schedule: linear
"""


def _write(tmp_path: Path, text: str, name: str = "params.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _err(excinfo: pytest.ExceptionInfo) -> str:
    """The PipelineError message, asserted to be a single line."""
    msg = str(excinfo.value)
    assert "\n" not in msg and "\r" not in msg, f"message is not one line: {msg!r}"
    return msg


def _train(**overrides) -> dict:
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in GOOD.items()}
    raw.update(overrides)
    return raw


def _load_err(tmp_path: Path, raw: dict) -> str:
    """Load `raw` as section `train` through a real YAML file; return the one-line error."""
    import yaml

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"train": raw}))
    with pytest.raises(PipelineError) as excinfo:
        load_section(Train, "train", path)
    msg = _err(excinfo)
    assert str(path) in msg
    return msg


# ------------------------------------------------------------------ happy path
def test_load_section_from_yaml_file_all_field_kinds(tmp_path):
    path = _write(tmp_path, GOOD_YAML)
    p = load_section(Train, "train", path)
    assert p == Train(
        steps=10, shuffle=True, name="run-a", splits=["pool", "dev"],
        weights={"a": 0.25, "b": 1.0}, optim=Optim(lr=0.01, schedule="linear"),
        limit=None, warmup=0.5, tags=[],
    )
    assert type(p.steps) is int
    assert type(p.shuffle) is bool
    assert isinstance(p.optim, Optim)
    # an int in a float position is widened to float
    assert type(p.weights["b"]) is float


def test_int_is_accepted_and_widened_for_float(tmp_path):
    path = _write(tmp_path, GOOD_YAML.replace("lr: 0.01", "lr: 1"))
    p = load_section(Train, "train", path)
    assert p.optim.lr == 1.0 and type(p.optim.lr) is float


def test_defaults_and_default_factory_are_fresh(tmp_path):
    a = from_dict(Train, _train(), "x")
    b = from_dict(Train, _train(), "x")
    assert a.limit is None and a.warmup == 0.5 and a.optim.schedule == "linear"
    a.tags.append("t")
    assert b.tags == []


def test_nested_default_used_when_absent():
    raw = _train(optim={"lr": 0.5})
    assert from_dict(Train, raw, "x").optim == Optim(lr=0.5, schedule="cosine")


@pytest.mark.parametrize("value, expected", [(None, None), (0, 0), (42, 42)])
def test_optional_accepts_null_and_inner_type(value, expected):
    assert from_dict(Train, _train(limit=value), "x").limit == expected


def test_optional_rejects_wrong_inner_type(tmp_path):
    msg = _load_err(tmp_path, _train(limit="many"))
    assert "train.limit" in msg and "'many'" in msg


def test_optional_still_checks_range(tmp_path):
    msg = _load_err(tmp_path, _train(limit=-1))
    assert "train.limit" in msg and ">= 0" in msg


def test_load_section_accepts_preloaded_data():
    data = {"train": _train()}
    assert load_section(Train, "train", path="nowhere.yaml", data=data).steps == 10


# ------------------------------------------------------------------ unknown / missing keys
def test_unknown_key_names_file_dotted_key_and_known_keys(tmp_path):
    path = _write(tmp_path, GOOD_YAML.replace("  steps: 10\n", "  steps: 10\n  stepz: 11\n"))
    with pytest.raises(PipelineError) as excinfo:
        load_section(Train, "train", path)
    msg = _err(excinfo)
    assert str(path) in msg
    assert "train.stepz" in msg
    assert "unknown key" in msg
    known = msg.split("known keys are", 1)[1]
    for name in ("limit", "name", "optim", "shuffle", "splits", "steps", "tags", "warmup", "weights"):
        assert name in known


@pytest.mark.parametrize("key, shown", [
    ("st\u0435ps", "st\\u0435ps"),        # a Cyrillic e: looks like "steps"
    ("ste\u200bps", "ste\\u200bps"),      # a zero-width space inside
    ("steps\u00a0", "steps\\xa0"),        # a no-break space after
    ("steps ", "steps\\x20"),              # a plain trailing blank
])
def test_an_invisible_or_look_alike_character_in_a_key_is_shown_escaped(key, shown):
    """#53: the one-line error shows the key as `\\u0435` escapes, so the person sees why "steps" is unknown."""
    raw = {**GOOD, key: 3}
    with pytest.raises(PipelineError) as excinfo:
        from_dict(Train, raw, "p.yaml: train")
    msg = _err(excinfo)
    assert msg.startswith(f"p.yaml: train.{shown}: unknown key") and msg.isascii(), msg
    assert shown_key("plain_key.1") == "plain_key.1"


def test_unknown_nested_key_names_full_path_and_nested_known_keys(tmp_path):
    msg = _load_err(tmp_path, _train(optim={"lr": 0.1, "momentum": 0.9}))
    assert "train.optim.momentum" in msg
    assert "unknown key" in msg
    assert msg.split("known keys are", 1)[1].strip() == "lr, schedule"


def test_missing_key(tmp_path):
    raw = _train()
    del raw["steps"]
    msg = _load_err(tmp_path, raw)
    assert "train.steps" in msg and "missing key" in msg and "int" in msg


def test_missing_nested_key_has_full_path(tmp_path):
    msg = _load_err(tmp_path, _train(optim={"schedule": "cosine"}))
    assert "train.optim.lr" in msg and "missing key" in msg


def test_doubly_nested_error_has_full_dotted_path():
    raw = {"inner": _train(optim={"lr": "fast"})}
    with pytest.raises(PipelineError) as excinfo:
        from_dict(Outer, raw, "params.yaml: outer")
    msg = _err(excinfo)
    assert msg.startswith("params.yaml: outer.inner.optim.lr:")
    assert "'fast'" in msg


# ------------------------------------------------------------------ types
@pytest.mark.parametrize("field, value, key, words", [
    ("steps", "10", "train.steps", "expected an integer"),
    ("steps", True, "train.steps", "expected an integer"),
    ("steps", 10.0, "train.steps", "expected an integer"),
    ("steps", None, "train.steps", "expected an integer"),
    ("shuffle", 1, "train.shuffle", "expected true or false"),
    ("shuffle", "yes", "train.shuffle", "expected true or false"),
    ("name", 3, "train.name", "expected a string"),
    ("warmup", True, "train.warmup", "expected a number"),
    ("warmup", "0.1", "train.warmup", "expected a number"),
    ("splits", "pool", "train.splits", "expected a list"),
    ("splits", ["pool", 3], "train.splits[1]", "expected a string"),
    ("weights", [1.0], "train.weights", "expected a mapping"),
    ("weights", {"a": "heavy"}, "train.weights.a", "expected a number"),
    ("optim", "fast", "train.optim", "expected a mapping"),
])
def test_ill_typed_values_are_rejected(tmp_path, field, value, key, words):
    msg = _load_err(tmp_path, _train(**{field: value}))
    assert f"{key}:" in msg
    assert words in msg


def test_section_that_is_not_a_mapping(tmp_path):
    path = _write(tmp_path, "train: 5\n")
    with pytest.raises(PipelineError) as excinfo:
        load_section(Train, "train", path)
    msg = _err(excinfo)
    assert str(path) in msg and "expected a mapping" in msg and "int" in msg


# ------------------------------------------------------------------ ranges and choices
@pytest.mark.parametrize("steps, bound", [(0, ">= 1"), (-5, ">= 1"), (1001, "<= 1000")])
def test_out_of_range(tmp_path, steps, bound):
    msg = _load_err(tmp_path, _train(steps=steps))
    assert "train.steps" in msg and bound in msg and str(steps) in msg


@pytest.mark.parametrize("steps", [1, 1000])
def test_range_bounds_are_inclusive(steps):
    assert from_dict(Train, _train(steps=steps), "x").steps == steps


def test_nested_float_range(tmp_path):
    msg = _load_err(tmp_path, _train(optim={"lr": 1.5}))
    assert "train.optim.lr" in msg and "<= 1.0" in msg



def test_nan_is_rejected_by_range_rules(tmp_path):
    path = _write(tmp_path, GOOD_YAML.replace("lr: 0.01", "lr: .nan"))
    with pytest.raises(PipelineError):
        load_section(Train, "train", path)


def test_choice_violation_lists_choices(tmp_path):
    msg = _load_err(tmp_path, _train(optim={"lr": 0.1, "schedule": "step"}))
    assert "train.optim.schedule" in msg
    assert "'step'" in msg
    assert "cosine, linear" in msg


def test_choices_apply_to_each_list_item(tmp_path):
    msg = _load_err(tmp_path, _train(splits=["pool", "test"]))
    assert "train.splits" in msg and "'test'" in msg and "pool, dev, eval" in msg


def test_list_items_all_in_choices_pass():
    assert from_dict(Train, _train(splits=["eval", "pool", "dev"]), "x").splits == ["eval", "pool", "dev"]


# ------------------------------------------------------------------ file-level errors
def test_missing_section(tmp_path):
    path = _write(tmp_path, GOOD_YAML)
    with pytest.raises(PipelineError) as excinfo:
        load_section(Train, "evaluate", path)
    msg = _err(excinfo)
    assert str(path) in msg and "'evaluate'" in msg and "missing" in msg


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(PipelineError) as excinfo:
        load_section(Train, "train", path)
    msg = _err(excinfo)
    assert str(path) in msg and "not found" in msg


def test_directory_is_not_a_params_file(tmp_path):
    with pytest.raises(PipelineError) as excinfo:
        read_params_file(tmp_path)
    assert "not found" in _err(excinfo)


@pytest.mark.parametrize("text, line", [
    ("train:\n  steps: [1, 2\n  name: x\n", 3),
    ("train:\n  steps: 1\n name: x\n", 3),
    ("a: 1\nb: 2\nc: 3\nd: 'unterminated\n", 5),
])
def test_malformed_yaml_reports_line_number(tmp_path, text, line):
    path = _write(tmp_path, text)
    with pytest.raises(PipelineError) as excinfo:
        read_params_file(path)
    msg = _err(excinfo)
    assert msg.startswith(f"{path}:{line}: not valid YAML")


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", ""])
def test_top_level_must_be_a_mapping(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(PipelineError) as excinfo:
        read_params_file(path)
    assert "expected a mapping" in _err(excinfo)



def test_yaml_reader_error_message_is_one_line(tmp_path):
    path = _write(tmp_path, "a: 1\nb: \x07\n")
    with pytest.raises(PipelineError) as excinfo:
        read_params_file(path)
    _err(excinfo)



def test_non_utf8_params_file_is_a_pipeline_error(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_bytes(b"base:\n  seed: \xff\n")
    with pytest.raises(PipelineError):
        read_params_file(path)


# ------------------------------------------------------------------ BaseParams
def test_load_base(tmp_path):
    path = _write(tmp_path, "base:\n  seed: 7\n  profile: default\n")
    assert load_base(path) == BaseParams(seed=7, profile="default")


def test_a_pipeline_section_is_refused_beside_an_unknown_section(tmp_path):
    """A misspelt section (`itmes:`) would be ignored while the stage reads the real one: it names the
    section and the closest known one; a file of other (non-pipeline) sections is not checked."""
    path = _write(tmp_path, "base:\n  seed: 7\n  profile: default\nitmes: {}\n")
    with pytest.raises(PipelineError) as excinfo:
        load_base(path)
    msg = _err(excinfo)
    assert str(path) in msg and "section 'itmes' is unknown (did you mean 'items'?)" in msg
    assert load_section(Train, "train", _write(tmp_path, GOOD_YAML, "other.yaml")).steps == 10


@pytest.mark.parametrize("body, words", [
    ("base:\n  seed: -1\n", ">= 0"),
    ("base:\n  seed: 1\n  profile: tpu\n", "default, gpu, micro"),
    ("base:\n  profile: gpu\n", "missing key"),
    ("train: {}\n", "section 'base' is missing"),
])
def test_load_base_errors(tmp_path, body, words):
    path = _write(tmp_path, body)
    with pytest.raises(PipelineError) as excinfo:
        load_base(path)
    msg = _err(excinfo)
    assert words in msg and str(path) in msg


def test_a_typo_inside_a_mapping_param_names_the_key(tmp_path):
    import yaml as _yaml

    from decision_pipeline.common.errors import PipelineError as _PE
    from decision_pipeline.curation.documents import IngestParams
    from decision_pipeline.common.params import load_section as _load
    root = Path(__file__).resolve().parents[2]
    data = _yaml.safe_load((root / "params.yaml").read_text())
    data["ingest"]["register_weights"] = {"forun": 0.6, "news": 0.4}
    path = tmp_path / "params.yaml"
    path.write_text(_yaml.safe_dump(data))
    with pytest.raises(_PE, match=r"ingest.register_weights.forun: unknown key; it may name news"):
        _load(IngestParams, "ingest", path)

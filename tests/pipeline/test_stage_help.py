"""`python -m stages.<name> --help` prints every field of the stage's params section with its help text."""
from __future__ import annotations

import dataclasses
import importlib
import typing

import pytest

from decision_pipeline.bench.adapter import S1mbParams
from decision_pipeline.bench.data import S1mbDataParams
from decision_pipeline.curation.documents import IngestParams
from decision_pipeline.curation.pipeline import CurateParams
from decision_pipeline.decision.base_model import BaseModelParams
from decision_pipeline.decision.item_splits import ItemsParams
from decision_pipeline.lm.bpe import TokenizerParams
from decision_pipeline.lm.training import PretrainParams

STAGES = {"items": ItemsParams, "ingest": IngestParams, "tokenizer": TokenizerParams, "curate": CurateParams,
          "pretrain": PretrainParams, "base_model": BaseModelParams, "s1mb_data": S1mbDataParams, "s1mb": S1mbParams}


def _classes(cls) -> list[type]:
    """A params class and the dataclasses nested in it (e.g. curate.minhash)."""
    hints = typing.get_type_hints(cls)
    out = [cls]
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += _classes(hints[f.name])
    return out


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_help_lists_every_field_with_its_doc(stage, capsys):
    module = importlib.import_module(f"stages.{stage}")
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for f in dataclasses.fields(STAGES[stage]):
        assert f"{stage}.{f.name}:" in out, f.name
        assert f.metadata["doc"] and " ".join(f.metadata["doc"].split()[:3]) in " ".join(out.split()), f.name


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_no_field_has_a_code_default(stage):
    """params.yaml and every profile must give each key: nothing falls back to a value written in code."""
    for cls in _classes(STAGES[stage]):
        for f in dataclasses.fields(cls):
            assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f"{cls.__name__}.{f.name}"
            assert f.metadata.get("doc"), f"{cls.__name__}.{f.name} has no help text"

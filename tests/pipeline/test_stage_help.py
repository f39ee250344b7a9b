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
from decision_pipeline.decision.base.config import BaseModelParams
from decision_pipeline.questions.splits import ItemsParams
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


def test_no_stage_imports_the_model_libraries_before_its_arguments_parse():
    """`python -m stages.<name> --help` (and a wrong flag) must not pay ~5-8 s of torch/transformers/peft
    imports: every stage module imports them inside main(), after parse_args (#34). One fresh interpreter
    imports every stage module and lists which pulled a model library in."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    names = sorted(p.stem for p in (root / "stages").glob("*.py") if p.stem != "__init__")
    assert len(names) > 20, names
    probe = ("import importlib, sys\n"
             "heavy = ('torch', 'transformers', 'peft', 'trl')\n"
             "for name in sys.argv[1:]:\n"
             "    importlib.import_module('stages.' + name)\n"
             "    loaded = [m for m in heavy if m in sys.modules]\n"
             "    if loaded:\n"
             "        print(name, ' '.join(loaded)); break\n")
    proc = subprocess.run([sys.executable, "-c", probe, *names], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "", f"stages.{proc.stdout.split()[0]} imports {proc.stdout.split()[1:]} at module level"

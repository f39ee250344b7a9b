"""Every params file (default, micro, gpu) loads through the stages' typed loaders."""
from pathlib import Path

import pytest
import yaml

from stages.base_model import BaseModelParams
from decision_pipeline.common.params import BaseParams, load_section
from stages.curate import CurateParams
from stages.evaluate import EvaluateParams
from stages.ingest import IngestParams
from stages.items import ItemsParams
from stages.pretrain import PretrainParams
from stages.tokenizer import TokenizerParams
from stages.generate import GenerateParams
from stages.select_chains import SelectChainsParams
from stages.s1mb_data import S1mbDataParams
from stages.s1mb import S1mbParams
from stages.sft import SFTParams
from stages.lr_sweep import LrSweepParams
from decision_pipeline.charter.annotate import AgreementParams, ReflectParams
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.charter.reviews import ReviewsParams
from decision_pipeline.charter.seed import SeedSampleParams
from decision_pipeline.charter.throughput import ThroughputParams

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = {"base": BaseParams, "items": ItemsParams, "ingest": IngestParams, "tokenizer": TokenizerParams,
            "curate": CurateParams, "pretrain": PretrainParams, "base_model": BaseModelParams,
            "evaluate": EvaluateParams, "generate": GenerateParams, "select_chains": SelectChainsParams,
            "s1mb_data": S1mbDataParams, "s1mb": S1mbParams, "sft": SFTParams, "lr_sweep": LrSweepParams,
            "seed_sample": SeedSampleParams, "reflect": ReflectParams, "judge": JudgeParams,
            "reviews": ReviewsParams, "judge_agreement": AgreementParams, "throughput": ThroughputParams}
FILES = [ROOT / "params.yaml", *sorted((ROOT / "profiles").glob("*.yaml"))]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_profile_loads_every_section(path):
    data = yaml.safe_load(path.read_text())
    assert set(data) == set(SECTIONS), f"{path.name}: sections differ from the stages"
    for name, cls in SECTIONS.items():
        load_section(cls, name, path)


@pytest.mark.parametrize("path", FILES[1:], ids=lambda p: p.name)
def test_profiles_have_the_same_keys_as_params(path):
    def keys(d, prefix=""):
        out = set()
        for k, v in d.items():
            out.add(prefix + k)
            if isinstance(v, dict) and k not in ("filters", "splits", "register_weights", "candidates", "reviewers"):
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

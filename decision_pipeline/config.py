"""Every params.yaml section and the config class that loads it (the classes live beside their code).

Why one index: a preflight (`make check`) and the tests load every section of
every profile through the typed loaders, and a section no stage knows is an error.
"""
from __future__ import annotations

from pathlib import Path

from decision_pipeline.bench.adapter import S1mbParams
from decision_pipeline.bench.data import S1mbDataParams
from decision_pipeline.charter.annotate import AgreementParams, ReflectParams
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.charter.reviews import ReviewsParams
from decision_pipeline.charter.seed import SeedSampleParams
from decision_pipeline.charter.throughput import ThroughputParams
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import BaseParams, load_section, read_params_file
from decision_pipeline.curation.documents import IngestParams
from decision_pipeline.curation.pipeline import CurateParams
from decision_pipeline.decision.base_model import BaseModelParams
from decision_pipeline.decision.calibration import CalibrateParams
from decision_pipeline.decision.chains import SelectChainsParams
from decision_pipeline.decision.evaluation import EvaluateParams
from decision_pipeline.decision.generation import GenerateParams
from decision_pipeline.decision.item_splits import ItemsParams
from decision_pipeline.decision.lr_choice import LrSweepParams
from decision_pipeline.decision.rl_probe import RlProbeParams
from decision_pipeline.decision.rl_select import RlSelectParams
from decision_pipeline.decision.rl_trainer import RLParams
from decision_pipeline.decision.sft_trainer import SFTParams
from decision_pipeline.lm.bpe import TokenizerParams
from decision_pipeline.lm.runtime import RuntimeParams
from decision_pipeline.lm.training import PretrainParams

SECTIONS: dict[str, type] = {
    "base": BaseParams, "items": ItemsParams, "ingest": IngestParams, "tokenizer": TokenizerParams,
    "curate": CurateParams, "pretrain": PretrainParams, "base_model": BaseModelParams,
    "generate": GenerateParams, "select_chains": SelectChainsParams, "lr_sweep": LrSweepParams,
    "sft": SFTParams, "calibrate": CalibrateParams, "evaluate": EvaluateParams,
    "s1mb_data": S1mbDataParams, "s1mb": S1mbParams,
    "rl_probe": RlProbeParams, "rl_select": RlSelectParams, "rl": RLParams,
    "seed_sample": SeedSampleParams, "reflect": ReflectParams, "judge": JudgeParams, "reviews": ReviewsParams,
    "judge_agreement": AgreementParams, "throughput": ThroughputParams, "runtime": RuntimeParams,
}


def load_all(path: str | Path = "params.yaml") -> dict[str, object]:
    """Load every section of a params file; an unknown or missing section is one clear line."""
    data = read_params_file(path)
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise PipelineError(f"{path}: section '{unknown[0]}' is unknown; known sections are {', '.join(SECTIONS)}")
    return {name: load_section(cls, name, path, data) for name, cls in SECTIONS.items()}

"""Params for tests, derived from the micro profile: a knob's value lives in params.yaml / profiles/micro.yaml
once, and a test `dataclasses.replace()`s only the fields it depends on (#22)."""
from __future__ import annotations

import copy
import dataclasses
import functools
from pathlib import Path
from typing import TypeVar

from decision_pipeline.common.params import from_dict
from decision_pipeline.common.profiles import merged_profile

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


@functools.cache
def _micro() -> dict:
    return merged_profile("micro", ROOT)


def micro_params(cls: type[T], section: str, **changes) -> T:
    """Section `section` of the micro profile loaded into `cls`, with `changes` replaced (validated once, as a whole)."""
    params = from_dict(cls, copy.deepcopy(_micro()[section]), f"micro profile: {section}")
    return dataclasses.replace(params, **changes) if changes else params


def tiny_pretrain_params(**changes):
    """The micro profile's pretrain section shrunk to a 16-wide one-layer model on 16-token sequences, fp32, one
    thread and no mid-run saves: what the pretraining library tests (lm, curation seed order) run in seconds."""
    from decision_pipeline.lm.model import TinyModelSpec
    from decision_pipeline.lm.training import PretrainParams
    values = dict(model=TinyModelSpec(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_positions=128),
                  seq_len=16, batch_size=4, warmup_steps=1, bf16=False, threads=1, save_steps=0)
    return micro_params(PretrainParams, "pretrain", **{**values, **changes})

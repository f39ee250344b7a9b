"""The params of answering, calibration and evaluation (`evaluate.answering`, `calibrate`, `evaluate`).

Kept apart from the answering code so that checking params (`make check`, the report, `--help`)
imports neither torch nor transformers (#34); the code modules import these classes from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from decision_pipeline.common.params import rule
from decision_pipeline.lm.params import BACKENDS

OFFSET_MODES = ("fitted", "tested", "off")


@dataclass
class AnsweringParams:
    """params.yaml `evaluate.answering`: how a model answers (calibrate reads the same keys, so the
    post-chain temperatures are fitted on chains sampled exactly as in evaluation)."""
    backend: str = rule(choices=BACKENDS, doc="engine that samples the thinking chains: hf or vllm")
    batch_size: int = rule(min=1, doc="questions per forward batch")
    max_new_tokens: int = rule(min=1, doc="token cap of a thinking chain")
    temperature: float = rule(min=0.0, doc="chain sampling temperature (0 = greedy)")
    top_p: float = rule(min=0.0, max=1.0, doc="nucleus sampling mass (1.0 = off)")
    threads: int = rule(min=1, doc="torch CPU threads")


@dataclass
class CalibrateParams:
    """params.yaml `calibrate`: per-task temperatures on the calibration split."""
    items: int = rule(min=1, doc="calibration questions used (a seed-free SHA-256 subset)")
    alpha: float = rule(min=0.0, max=1.0, doc="level of the likelihood-ratio test a fitted temperature must pass")
    resplits: int = rule(min=0, doc="halvings in the study of that rule on the calibration items (0 = skip)")
    ece_bins: int = rule(min=2, doc="equal-width confidence bins of the ECE")
    yes_offset: str = rule(choices=OFFSET_MODES, doc="the yes/no logit offset evaluation applies: fitted = the "
                           "research's, fitted by NLL on the calibration split after the temperature; tested = kept "
                           "only where its likelihood-ratio test against 0 passes alpha; off = none. A fit at the "
                           "search bound (every yes/no item has one answer) is never applied")
    folds: int = rule(min=2, doc="cross-fitting folds of the hypotheses H1-H4: each calibration item is scored by "
                      "what the other folds fitted, so the tests read no item they were fitted on")
    bootstrap: int = rule(min=10, doc="paired bootstrap resamples behind H1-H4 (CI and p) and the offset's CI")


@dataclass
class EvaluateParams:
    """params.yaml `evaluate`: the eval split, answered by readout and by thinking."""
    answering: AnsweringParams = rule(doc="how the model answers (calibrate reads the same keys)")
    max_items: int = rule(min=1, doc="eval questions used (a seed-free SHA-256 subset)")
    ece_bins: int = rule(min=2, doc="equal-width confidence bins of the ECE and reliability plot")
    bootstrap: int = rule(min=10, doc="bootstrap resamples behind every confidence interval")

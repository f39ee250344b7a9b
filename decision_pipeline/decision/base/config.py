"""The params of the `base_model` stage: where the decision model's base comes from and how it is scored.

Kept apart from base/model.py so that checking params (`make check`, the report, `--help`) imports
neither torch nor transformers (#34).
"""
from __future__ import annotations

from dataclasses import dataclass

from decision_pipeline.common.params import rule


@dataclass
class BaseModelParams:
    """Where the base model comes from and how many questions score it."""
    source: str = rule(choices=("pretrain", "path"), doc="pretrain: the pretrain@curated model; path: `path`")
    nll_items: int = rule(min=1, doc="held-out eval questions used for the gold-trace NLL")
    path: str = rule(external=True, doc="local Hugging Face model directory when source is path (a dep of the stage); "
                         "configs/external/none = none")
    threads: int = rule(min=1, doc="torch CPU threads")
    add_think_tokens: bool = rule(doc="add <think>/</think> as whole added tokens (and grow the embeddings) when the "
                                      "base's tokenizer lacks them as single tokens, e.g. SmolLM2 or Llama")

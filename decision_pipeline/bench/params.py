"""The `s1mb` params section, apart from the adapter that runs models, so that checking params
never imports torch (#34); `bench.adapter` re-exports it."""
from __future__ import annotations

from dataclasses import dataclass

from decision_pipeline.common.params import rule


@dataclass
class S1mbParams:
    """How the adapter reads a model and what it is ranked against (the ``s1mb`` params section).

    The readout temperatures are not a param: they are the model's own fitted
    ones (``calibrate@<model>``, ``load_readout_temperatures``).
    """
    batch_size: int = rule(min=1, doc="questions per readout forward pass (and per thinking batch)")
    route_fraction: float = rule(min=0.0, max=1.0, doc="lowest-margin share answered by thinking (routed variant)")
    route_eps: float = rule(min=0.0, max=0.5, doc="mass spread off the thinking answer")
    max_new_tokens: int = rule(min=1, doc="thinking chain length limit")
    cohort_dir: str = rule(doc="directory of published model folders for Borda/rank; '' = none")
    threads: int = rule(min=1, doc="torch CPU threads")
    backend: str = rule(choices=("hf", "vllm"), doc="engine that samples the routed thinking chains "
                                                    "(the evaluate.answering backend of the same profile)")
    bootstrap: int = rule(min=10, doc="item-bootstrap resamples (cases within a benchmark) behind the Task Avg "
                                      "and task-score 95% CIs")

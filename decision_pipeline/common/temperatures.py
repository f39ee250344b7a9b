"""Reading calibrate's `temperatures.json` (per-task temperatures for the readout and post-chain answers).

Why here: calibrate writes the file and evaluate, s1mb and rl_select read it; a hand-edited or
corrupt file (a NaN, a zero, a typo in a section name) must stop the reader at once with the
file and key, before a model is loaded, instead of surfacing as a ValueError mid-metrics.
"""
from __future__ import annotations

import math
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import read_json

SECTIONS = ("readout", "post_chain")


def read_temperatures(path: str | Path) -> dict[str, dict[str, float]]:
    """`{"readout": {task: T}, "post_chain": {task: T}}` with every T finite and > 0."""
    data = read_json(path)
    if not isinstance(data, dict) or set(data) - set(SECTIONS):
        raise PipelineError(f"{path}: expected a mapping with keys {', '.join(SECTIONS)}; rerun calibrate")
    for section, temps in data.items():
        if not isinstance(temps, dict):
            raise PipelineError(f"{path}: {section} must map task names to temperatures; rerun calibrate")
        for task, value in temps.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise PipelineError(f"{path}: {section}.{task} is {value!r}, not a finite temperature > 0; "
                                    "rerun calibrate")
    return data

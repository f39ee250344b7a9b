"""A thinking-accuracy change told as parse rate + right-when-answered (issue 50), from the recorded paired
keys when evaluate wrote them, else from each model's parse rate and accuracy (hand-computed both ways)."""
from __future__ import annotations

import json
from pathlib import Path

from decision_pipeline.reporting.report.decomposition import thinking_split
from decision_pipeline.reporting.report.sources import Store


def _write(root: Path, rel: str, data: dict) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(json.dumps(data))


def test_split_from_each_models_parse_rate_and_accuracy(tmp_path):
    # SFT parse 0.5, accuracy 0.3 (right when answered 0.6); RL 0.9, 0.6 (2/3): 0.4 x 0.6 = +0.240 from
    # answering more often, 0.9 x 0.0667 = +0.060 from answering better (sum 0.3, the accuracy change)
    _write(tmp_path, "metrics/evaluate/sft.json", {"thinking": {"parse_rate": 0.5}, "cis": {"thinking_accuracy": {"point": 0.3}}})
    _write(tmp_path, "metrics/evaluate/rl.json", {"thinking": {"parse_rate": 0.9}, "cis": {"thinking_accuracy": {"point": 0.6}}})
    text = thinking_split(Store(tmp_path), "metrics/evaluate/rl.json", "vs_sft", "metrics/evaluate/sft.json")
    assert "parse rate 0.500 \u2192 0.900 (+0.400)" in text and "right when answered 0.600 \u2192 0.667 (+0.067)" in text
    assert "answering more often accounts for +0.240 and answering better for +0.060" in text
    assert "point estimates" in text


def test_split_from_the_recorded_paired_keys(tmp_path):
    _write(tmp_path, "metrics/evaluate/sft.json", {"thinking": {"parse_rate": 0.5}})
    _write(tmp_path, "metrics/evaluate/rl.json", {"vs_sft": {
        "thinking_parse_rate": {"diff": 0.4, "ci_low": 0.3, "ci_high": 0.5, "model": 0.9, "baseline": 0.5},
        "thinking_right_when_answered": {"diff": 0.066667, "ci_low": -0.02, "ci_high": 0.15, "model": 0.666667,
                                         "baseline": 0.6},
        "thinking_decomposition": {"parse_part": 0.24, "right_part": 0.06, "total": 0.3}}})
    text = thinking_split(Store(tmp_path), "metrics/evaluate/rl.json", "vs_sft", "metrics/evaluate/sft.json")
    assert "(+0.400 [+0.300, +0.500])" in text and "(+0.067 [-0.020, +0.150])" in text
    assert "accounts for +0.240 and answering better for +0.060" in text and "paired 95% CIs" in text

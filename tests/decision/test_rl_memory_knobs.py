"""GRPO memory knobs from params: vLLM share/context/sleep mode, micro-batches with accumulation,
gradient checkpointing (#21)."""
import dataclasses
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.launch import LaunchParams
from decision_pipeline.decision.rl.config import RLParams
from decision_pipeline.decision.rl.trainer import grpo_config
from tests.decision import rl_helpers

# the memory knobs off, as these tests' "default" cases assert them
KNOBS_OFF = dict(vllm_max_model_length=0, vllm_enable_sleep_mode=False, micro_batch_size=0, gradient_checkpointing=False)


def _params(**overrides) -> RLParams:
    return dataclasses.replace(rl_helpers.toy_params(), **{**KNOBS_OFF, **overrides})


def test_grpo_config_carries_the_vllm_memory_knobs(tmp_path):
    p = _params(vllm_gpu_memory_utilization=0.25, vllm_max_model_length=16384, vllm_enable_sleep_mode=True,
                gradient_checkpointing=True)
    c = grpo_config(p, 0, tmp_path)
    assert (c.vllm_gpu_memory_utilization, c.vllm_max_model_length, c.vllm_enable_sleep_mode) == (0.25, 16384, True)
    assert c.gradient_checkpointing is True
    default = grpo_config(_params(), 0, tmp_path)
    assert default.vllm_max_model_length is None  # 0 = the model's own context
    assert default.gradient_checkpointing is False and default.vllm_enable_sleep_mode is False


def test_micro_batches_keep_the_step_and_generation_batch(tmp_path):
    # toy: 4 prompts x 4 generations per round, 2 optimizer steps a round -> 8 completions a step
    whole = grpo_config(_params(), 0, tmp_path)
    assert (whole.per_device_train_batch_size, whole.gradient_accumulation_steps, whole.steps_per_generation) == (8, 1, 2)
    micro = grpo_config(_params(micro_batch_size=2), 0, tmp_path)
    # 2 completions a forward pass, 4 of them an optimizer step, 8 micro-batches a round of 16
    assert (micro.per_device_train_batch_size, micro.gradient_accumulation_steps, micro.steps_per_generation) == (2, 4, 8)
    assert micro.generation_batch_size == whole.generation_batch_size == 16


def test_a_step_batch_not_a_multiple_of_the_micro_batch_is_refused():
    with pytest.raises(PipelineError, match=r"multiple of micro_batch_size x launch.num_processes \(3 x 1\)"):
        _params(micro_batch_size=3)
    with pytest.raises(PipelineError, match="rl.micro_batch_size"):
        _params(micro_batch_size=8, launch=LaunchParams(config="configs/accelerate/ddp.yaml", num_processes=2))


def test_gpu_profile_rl_fits_one_card_settings():
    root = Path(__file__).resolve().parents[2]
    from decision_pipeline.common.params import from_dict
    from decision_pipeline.common.profiles import merged_profile
    p = from_dict(RLParams, merged_profile("gpu", root)["rl"], "gpu profile: rl")
    assert p.micro_batch_size in (1, 2) and p.gradient_checkpointing
    assert p.vllm_max_model_length >= p.max_completion_length and p.vllm_gpu_memory_utilization <= 0.4
    assert dataclasses.asdict(p)["vllm_enable_sleep_mode"] is True


def test_grpo_trains_in_micro_batches_one_round(toy_model_dir, tmp_path):
    """2 optimizer steps (one round of 16 completions) as micro-batches of 2 with accumulation 4."""
    import json

    import torch

    from decision_pipeline.decision.rl.trainer import fingerprint_parts, train_grpo
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.model import load_model

    torch.set_num_threads(1)
    p = _params(max_steps=2, save_steps=2, micro_batch_size=2, gradient_checkpointing=True)
    questions = json.loads(Path(toy_model_dir, "questions.json").read_text())[: p.prompts_needed]
    model, tok = load_model(toy_model_dir), load_tokenizer(toy_model_dir)
    fp = fingerprint_parts(p, 0, questions, "tiny", "code")
    peft_model, history, _ = train_grpo(model, tok, questions, p, 0, tmp_path / "w", fp,
                                        registry={"low_ids": rl_helpers.low_ids})
    rows = [json.loads(line) for line in (tmp_path / "w" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == rl_helpers.ROUND_PROMPTS * rl_helpers.GENERATIONS  # one generation round, whole
    assert max(h.get("step", 0) for h in history) == 2
    assert rl_helpers.adapter_digest(peft_model)[1] > 0  # the adapter moved


def test_memory_placement_knobs_do_not_refuse_a_resume_but_the_micro_batch_does():
    from decision_pipeline.decision.rl.trainer import fingerprint_parts
    qs = [{"id": "q1"}]
    base = fingerprint_parts(_params(), 0, qs, "m", "c")
    placed = fingerprint_parts(_params(gradient_checkpointing=True, vllm_gpu_memory_utilization=0.5,
                                       vllm_enable_sleep_mode=True), 0, qs, "m", "c")
    assert placed == base
    assert fingerprint_parts(_params(micro_batch_size=2), 0, qs, "m", "c") != base

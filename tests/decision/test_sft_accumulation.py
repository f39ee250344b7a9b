"""sft.micro_batch_size: exact gradient accumulation (micro 4 x 2 = batch 8), derived steps, checkpointing (#21)."""
import pytest
import torch
from transformers import TrainerCallback

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.launch import LaunchParams
from decision_pipeline.decision.sft.data import JointCollator, build_joint_examples
from decision_pipeline.decision.sft.loss import _chain_sums, joint_losses
from decision_pipeline.decision.sft.trainer import sft_config, train_joint
from decision_pipeline.lm.model import load_model
from tests.decision.test_sft import sft_params


class _FirstGrads(TrainerCallback):
    """The trainable parameters' gradients just before the first optimizer step."""

    def __init__(self):
        self.grads = None

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if self.grads is None:
            self.grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()
                          if p.requires_grad and p.grad is not None}


def _examples(tok, questions):
    # chains of very different lengths, so a mean of per-micro-batch means would weight them wrongly
    kept = [{"id": f"c{i}", "question_id": q["id"],
             "text": "<think>\n" + " x" * (1 + 12 * (i % 3)) + "\n</think>\nAnswer: A"}
            for i, q in enumerate(questions[:6])]
    examples, _ = build_joint_examples(tok, questions[:6], kept, {}, 0.5, 1.0, 512)
    return examples


def test_micro_batches_with_accumulation_give_the_whole_batch_gradient(tiny_dir, tiny, questions, tmp_path):
    _, tok = tiny
    examples = _examples(tok, questions)
    runs = []
    for micro in (0, 4):
        grabber = _FirstGrads()
        s = sft_params(batch_size=8, micro_batch_size=micro, max_steps=1)
        _, _, parts = train_joint(load_model(tiny_dir), tok, examples, s, 1e-3, 3, tmp_path / f"m{micro}",
                                  callbacks=[grabber])
        runs.append((parts, grabber.grads))
    (whole_parts, whole), (micro_parts, acc) = runs
    assert len(whole_parts) == len(micro_parts) == 1  # one loss row per optimizer step
    assert micro_parts[0]["chain_loss"] == pytest.approx(whole_parts[0]["chain_loss"], abs=1e-4)
    assert micro_parts[0]["readout_loss"] == pytest.approx(whole_parts[0]["readout_loss"], abs=1e-4)
    assert whole and set(whole) == set(acc)
    nonzero = [n for n in whole if whole[n].abs().max() > 0]
    assert nonzero
    for n in whole:
        torch.testing.assert_close(acc[n], whole[n], rtol=1e-4, atol=1e-6)


def test_accumulation_steps_are_derived_exactly_and_checkpointing_is_a_param(tmp_path):
    s = sft_params(batch_size=16, micro_batch_size=2, gradient_checkpointing=True)
    config = sft_config(s, 1e-3, 0, tmp_path, 3)
    assert (config.per_device_train_batch_size, config.gradient_accumulation_steps) == (2, 8)
    assert config.gradient_checkpointing is True
    default = sft_config(sft_params(batch_size=16, micro_batch_size=0, gradient_checkpointing=False), 1e-3, 0,
                         tmp_path, 3)
    assert (default.per_device_train_batch_size, default.gradient_accumulation_steps) == (16, 1)
    assert default.gradient_checkpointing is False
    two = sft_params(batch_size=16, micro_batch_size=4,
                     launch=LaunchParams(config="configs/accelerate/ddp.yaml", num_processes=2))
    assert two.accumulation(2) == (4, 2)


def test_a_batch_not_a_multiple_of_micro_times_processes_is_refused():
    with pytest.raises(PipelineError, match=r"sft\.batch_size \(8\) must be a multiple of sft\.micro_batch_size"):
        sft_params(batch_size=8, micro_batch_size=3)
    with pytest.raises(PipelineError, match="micro_batch_size"):
        sft_params(batch_size=8, micro_batch_size=8,
                   launch=LaunchParams(config="configs/accelerate/ddp.yaml", num_processes=2))


def test_bf16_logits_are_cast_to_fp32_only_where_loss_is(tiny, questions):
    _, tok = tiny
    batch = JointCollator(tok.pad_token_id)(_examples(tok, questions)[:4])
    logits = torch.randn(*batch["input_ids"].shape, 50).to(torch.bfloat16)
    batch["input_ids"] = batch["input_ids"] % 50
    lo_sum, lo_w = _chain_sums(logits, batch)
    hi_sum, hi_w = _chain_sums(logits.float(), batch)  # the fp32 path over every position
    assert lo_sum.dtype == torch.float32 and float(lo_w) == float(hi_w)
    assert float(lo_sum) == pytest.approx(float(hi_sum), rel=1e-5)
    chain, readout = joint_losses(logits, batch)
    assert chain.dtype == torch.float32 and readout.dtype == torch.float32

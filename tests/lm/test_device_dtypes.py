"""The untrained reference keeps the trained model's dtype and device; pretraining autocasts on the
device it trains on (#21)."""
import warnings

import torch

from decision_pipeline.decision.base.model import untrained_like
from decision_pipeline.lm.model import TinyModelSpec, build_tiny_model
from decision_pipeline.lm.training import train_autocast

SPEC = TinyModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=64)


def test_untrained_reference_has_the_models_dtype():
    model = build_tiny_model(SPEC, 100, 0, 1, seed=0).to(torch.bfloat16)
    fresh = untrained_like(model, 3)
    assert {p.dtype for p in fresh.parameters()} == {torch.bfloat16}
    assert torch.get_default_dtype() == torch.float32  # the default dtype is restored
    again = untrained_like(model, 3)
    assert all(torch.equal(a, b) for a, b in zip(fresh.parameters(), again.parameters()))


def test_untrained_reference_is_built_on_the_models_device():
    with torch.device("meta"):  # stands in for cuda: any device but the CPU
        model = build_tiny_model(SPEC, 100, 0, 1, seed=0)
    assert {p.device.type for p in untrained_like(model, 3).parameters()} == {"meta"}


def test_fp32_cpu_reference_is_unchanged():
    model = build_tiny_model(SPEC, 100, 0, 1, seed=0)
    torch.manual_seed(3)
    old_way = type(model)(model.config)
    assert all(torch.equal(a, b) for a, b in zip(untrained_like(model, 3).parameters(), old_way.parameters()))


def test_pretrain_autocast_follows_the_training_device():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CPU-only torch warns that CUDA autocast is disabled
        gpu = train_autocast(torch.device("cuda"), bf16=True)
    assert (gpu.device, gpu.fast_dtype) == ("cuda", torch.bfloat16)
    cpu = train_autocast(torch.device("cpu"), bf16=True)
    assert (cpu.device, cpu.fast_dtype, cpu._enabled) == ("cpu", torch.bfloat16, True)
    assert train_autocast(torch.device("cpu"), bf16=False)._enabled is False

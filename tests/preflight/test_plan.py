"""The memory plan on the published Qwen3-4B shapes (config fixture, no weights), and its exact terms
checked against a real tiny model on CPU."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from decision_pipeline.preflight.plan import (GIB, ModelShape, failures, lora_param_count, memory_plan,
                                              param_count, read_shape)
from decision_pipeline.preflight.profile import profile_params

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "qwen3_4b"
@pytest.fixture(scope="module")
def shape() -> ModelShape:
    return read_shape(FIXTURE)


@pytest.fixture
def gpu() -> dict:
    """The shipped GPU profile merged over params.yaml (in memory)."""
    return profile_params("gpu", ROOT)


def test_qwen3_4b_counts_by_hand(shape):
    # embed 151936*2560 (tied) + 36 * (attn 2560*4096*2 + 2560*1024*2 + 2*128 norms, mlp 3*2560*9728, 2 norms) + final
    per_layer = 2 * 2560 * 4096 + 2 * 2560 * 1024 + 256 + 3 * 2560 * 9728 + 2 * 2560
    assert param_count(shape) == 151936 * 2560 + 36 * per_layer + 2560 == 4_022_468_096
    # LoRA r=64 on all seven: q (2560+4096), k,v (2560+1024), o (4096+2560), gate/up (2560+9728), down (9728+2560)
    per_layer_lora = 64 * ((2560 + 4096) * 2 + (2560 + 1024) * 2 + (2560 + 9728) * 3)
    assert lora_param_count(shape, 64, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                        "down_proj"]) == 36 * per_layer_lora


def test_shipped_gpu_profile_fits_80_with_a_10_percent_margin(shape, gpu):
    """The profile's SFT (1 x 32,768 tokens through the stage's joint loss in 4,096-position chunks) and GRPO
    both plan at or below 72 GiB, so an 80 GiB card runs them with 10% to spare; the lengths are the research's."""
    assert gpu["sft"]["max_length"] == 32768 and gpu["sft"]["loss_chunk_tokens"] == 4096
    assert gpu["rl"]["max_completion_length"] == 8192
    for gib in (141, 80):
        plans = memory_plan(gpu, shape, gib)
        assert {p.stage for p in plans} == {"readout", "post-chain readout", "vllm generation", "sft", "grpo"}
        assert failures(plans, gib) == []
    peak = {p.stage: p.peak_gib for p in memory_plan(gpu, shape, 80)}
    assert peak["sft"] <= 72 and peak["grpo"] <= 72


def test_the_chunk_sets_the_loss_head(shape, gpu):
    """One chunk over the whole row is the old loss (14 bytes per logit over 32,768 x 151,936: 65 GiB, refused
    on 80 GiB naming sft.loss_chunk_tokens); each halving of the chunk about halves the loss head."""
    whole = copy.deepcopy(gpu)
    whole["sft"]["loss_chunk_tokens"] = whole["sft"]["max_length"]
    sft = next(p for p in memory_plan(whole, shape, 80) if p.stage == "sft")
    assert sft.terms["loss head"] / GIB == pytest.approx(32768 * 151936 * 14 / GIB, rel=0.01)
    errs = failures(memory_plan(whole, shape, 80), 80)
    assert len(errs) == 1 and "stage sft needs" in errs[0] and errs[0].endswith("change sft.loss_chunk_tokens")
    heads = []
    for chunk in (8192, 4096, 2048):
        whole["sft"]["loss_chunk_tokens"] = chunk
        sft = next(p for p in memory_plan(whole, shape, 80) if p.stage == "sft")
        heads.append(sft.terms.get("loss head", 0.0))
    assert heads[0] > heads[1] > 0 and heads[0] / heads[1] == pytest.approx(2, rel=0.1)
    assert heads[2] == 0.0      # at 2,048 one recomputed layer (6.9 GiB) outweighs the loss head


def test_a_40_gib_card_needs_a_smaller_vllm_share(shape, gpu):
    """docs/gpu.md's card table: on 40 GiB only the post-chain readout (beside vLLM's 0.8 of the card) is
    refused, naming runtime.vllm_gpu_memory_utilization; at 0.65 every stage fits."""
    errs = failures(memory_plan(gpu, shape, 40), 40)
    assert len(errs) == 1 and "stage post-chain readout needs 43.5 GiB" in errs[0]
    assert errs[0].endswith("change runtime.vllm_gpu_memory_utilization")
    smaller = copy.deepcopy(gpu)
    smaller["runtime"]["vllm_gpu_memory_utilization"] = 0.65
    assert failures(memory_plan(smaller, shape, 40), 40) == []


@pytest.mark.parametrize("chunk", [0, -1, 32769, "4096", True])
def test_a_bad_chunk_is_one_line_naming_the_key(shape, gpu, chunk):
    from decision_pipeline.common.errors import PipelineError
    bad = copy.deepcopy(gpu)
    bad["sft"]["loss_chunk_tokens"] = chunk
    with pytest.raises(PipelineError, match=r"^sft\.loss_chunk_tokens: .* between 1 and sft\.max_length \(32768\)"):
        memory_plan(bad, shape, 80)


def test_gpu_profile_without_knobs_is_refused(shape):
    """Before the knobs (no accumulation, no checkpointing, TRL's 0.3 share at a 262k context): refused."""
    params = profile_params("gpu", ROOT)
    for section in ("sft", "rl"):
        for key in ("micro_batch_size", "gradient_checkpointing"):
            params[section].pop(key, None)
    params["rl"].pop("vllm_max_model_length", None)
    errs = failures(memory_plan(params, shape, 141), 141)
    assert any("stage sft" in e and "sft.gradient_checkpointing" in e for e in errs)
    assert any("rl.vllm_max_model_length" in e and "36.0 GiB" in e for e in errs)   # 262144 * 144 KiB


def test_longer_rows_refused_naming_the_length(shape, gpu):
    """With the chunked loss the rows' activations set the SFT peak: 8 x the profile's length (262,144 tokens)
    does not fit 80 GiB and the refusal names sft.max_length."""
    longer = copy.deepcopy(gpu)
    longer["sft"]["max_length"] *= 8
    errs = failures(memory_plan(longer, shape, 80), 80)
    assert len(errs) == 1 and "stage sft needs" in errs[0] and errs[0].endswith("change sft.max_length")


def test_doubled_completion_length_refused(shape, gpu):
    doubled = copy.deepcopy(gpu)
    doubled["rl"]["max_completion_length"] *= 2
    errs = failures(memory_plan(doubled, shape, 141), 141)
    assert len(errs) == 1 and "stage grpo" in errs[0] and "raise rl.vllm_max_model_length" in errs[0]


def test_grpo_batch_headroom(shape, gpu):
    """TRL's fused LM head never builds the [tokens, vocabulary] logits, so GRPO's update grows with the
    activations only: rl.micro_batch_size 2 -> 16 still fits 80 GiB; 32 does not, and the knob is named."""
    bigger = copy.deepcopy(gpu)
    bigger["rl"]["micro_batch_size"] = 16
    assert failures(memory_plan(bigger, shape, 80), 80) == []
    bigger["rl"]["micro_batch_size"] = 32
    errs = failures(memory_plan(bigger, shape, 80), 80)
    assert len(errs) == 1 and "stage grpo needs" in errs[0] and errs[0].endswith("change rl.micro_batch_size")


def test_loss_path_is_an_input(shape):
    """The same GRPO shape through the three log-prob paths: TRL's fused LM head < selective_log_softmax's
    Triton kernel (6 bytes per kept logit) < the first smoke's fp32 loop (16)."""
    from decision_pipeline.preflight.plan import grpo_peak
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    peak = {loss: grpo_peak(shape, 4, 256, 8192, 64, targets, True, loss).allocated_gib
            for loss in ("trl_fused_lm_head", "selective_log_softmax", "fp32_log_softmax")}
    assert peak["trl_fused_lm_head"] < peak["selective_log_softmax"] < peak["fp32_log_softmax"]
    kept = 4 * 8192 * 151936
    # 16 traced bytes per kept logit against the measured 6
    assert peak["fp32_log_softmax"] - peak["selective_log_softmax"] == pytest.approx(10 * kept / GIB, rel=0.01)
    fallback = grpo_peak(shape, 4, 256, 8192, 64, targets, True, "selective_log_softmax", triton=False)
    assert fallback.terms["loss head"] == pytest.approx(6.0 * kept, rel=0.01)   # the traced torch fallback


def test_doubled_batch_without_accumulation_refused(shape, gpu):
    """SFT without accumulation (micro_batch_size 0 = the whole batch per forward) at a doubled batch."""
    doubled = copy.deepcopy(gpu)
    doubled["sft"]["micro_batch_size"] = 0
    doubled["sft"]["batch_size"] *= 2
    errs = failures(memory_plan(doubled, shape, 141), 141)
    assert len(errs) == 1 and "stage sft needs" in errs[0] and "change sft.micro_batch_size" in errs[0]


def test_cli_exit_codes(tmp_path, gpu):
    merged = tmp_path / "gpu.yaml"
    merged.write_text(yaml.safe_dump(gpu))
    cmd = [sys.executable, "-m", "decision_pipeline", "preflight", "plan", "--params", str(merged),
           "--model-config", str(FIXTURE)]
    ok = subprocess.run(cmd + ["--gpu-gib", "141"], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    assert sum(line.split()[0] in {"readout", "post-chain", "vllm", "sft", "grpo"} for line in ok.stdout.splitlines()) == 5
    small = subprocess.run(cmd + ["--gpu-gib", "8"], capture_output=True, text=True, cwd=ROOT)
    assert small.returncode == 2
    first = small.stderr.splitlines()[0]
    assert first.startswith("memory plan: stage ") and ("change " in first or "set " in first)


def test_weights_and_optimizer_terms_match_a_real_model(tmp_path):
    """Exact: parameter counts, bf16 weight bytes, LoRA params and AdamW state bytes of a real tiny Qwen3."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM
    cfg = Qwen3Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      intermediate_size=96, vocab_size=300, tie_word_embeddings=True, max_position_embeddings=128)
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_dict()))
    shape = read_shape(tmp_path)
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    assert sum(p.numel() for p in model.parameters()) == param_count(shape)
    assert sum(p.numel() * p.element_size() for p in model.parameters()) == 2 * param_count(shape)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=targets))
    trainable = [p for p in peft.parameters() if p.requires_grad]
    assert sum(p.numel() for p in trainable) == lora_param_count(shape, 4, targets)
    assert all(p.dtype == torch.float32 for p in trainable)   # PEFT keeps adapters fp32: 4 bytes of the 16
    opt = torch.optim.AdamW(trainable, lr=1e-3)
    for p in trainable:
        p.grad = torch.zeros_like(p)
    opt.step()
    state = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values() if t.dim() > 0)
    grads = sum(p.grad.numel() * p.grad.element_size() for p in trainable)
    weights = sum(p.numel() * p.element_size() for p in trainable)
    assert weights + grads + state == 16 * lora_param_count(shape, 4, targets)


def test_kv_cache_per_token_by_hand(shape):
    from decision_pipeline.preflight.plan import kv_bytes_per_token
    assert kv_bytes_per_token(shape) == 2 * 36 * 8 * 128 * 2 == 147456
    assert kv_bytes_per_token(shape) * 262144 / GIB == 36.0


def test_merge_profile_is_recursive_and_leaves_inputs_alone():
    from decision_pipeline.preflight.profile import merge_profile
    base = {"sft": {"lr": 1.0, "launch": {"num_processes": 1, "config": "a"}}, "items": {"levels": [0, 1]}}
    overlay = {"sft": {"launch": {"num_processes": 4}}, "items": {"levels": [2]}, "runtime": {"device": "cuda"}}
    merged = merge_profile(base, overlay)
    assert merged == {"sft": {"lr": 1.0, "launch": {"num_processes": 4, "config": "a"}}, "items": {"levels": [2]},
                      "runtime": {"device": "cuda"}}
    assert base["sft"]["launch"]["num_processes"] == 1


def test_hours_from_measured_rates(gpu):
    """Each rate is the measured table's, said so; vLLM's is an assumption and printed as one."""
    from decision_pipeline.preflight.hours import render_hours, stage_tokens
    rows = {stage: (tokens, rate, where) for stage, tokens, rate, where, _ in stage_tokens(gpu)}
    # sft: max_steps 3000 x batch 16 x (512 prompt + 2000 chain); 1 x 2,512 tokens per forward -> the 8,192 row
    assert rows["sft"] == (3000 * 16 * 2512, 5950, "measured at 8,192 tok/forward")
    # generate: 20,000 questions x k 4 x 2,512 tokens through vLLM at the assumed 20,000 tok/s
    assert rows["generate"] == (20000 * 4 * 2512, 20000, "ASSUMED (vLLM not measured)")
    assert rows["rl (updates)"][1:] == (6139, "measured GRPO update (slower end)")
    assert rows["evaluate (readout)"][1] == 23000
    text = render_hours(gpu)
    assert "measured on one NVIDIA H200" in text and "an assumption until vLLM is measured" in text
    assert f"{3000 * 16 * 2512 / 5950 / 3600:.1f}" in next(line for line in text.splitlines() if line.startswith("sft "))


def test_hf_decode_rate_by_batch():
    """hf decoding: batch x 1000 / ms per step, ms linear between the measured batch sizes (76.6 at 1, 81.6 at 64)."""
    from decision_pipeline.preflight.hours import Rates
    from decision_pipeline.preflight.measured import load
    rates = Rates(load())
    assert rates.hf_rate(1)[0] == pytest.approx(1000 / 76.6)
    assert rates.hf_rate(64)[0] == pytest.approx(64 * 1000 / 81.6)
    assert rates.hf_rate(32)[0] == pytest.approx(32 * 1000 / (76.6 + 5.0 * 31 / 63))
    assert rates.hf_rate(256)[0] == pytest.approx(256 * 1000 / 81.6)    # past the last measured batch: its ms


def test_hf_decode_rate_follows_the_profiles_mode():
    """A compiled mode's figures are used only when the profile selects that mode (else eager's, said so)."""
    from decision_pipeline.preflight.hours import Rates
    from decision_pipeline.preflight.measured import load
    data = load()
    data["throughput"]["hf_decode_ms_per_step"]["static_inductor"] = {"1": 10.0, "64": 20.0}
    assert Rates(data, "static_inductor").hf_rate(64) == (64 * 1000 / 20.0,
                                                          "measured hf decode (static_inductor), batch 64")
    assert Rates(data, "eager").hf_rate(64)[0] == pytest.approx(64 * 1000 / 81.6)
    assert Rates(data, "static_cudagraphs").decode_mode == "eager"     # not measured: eager's figures

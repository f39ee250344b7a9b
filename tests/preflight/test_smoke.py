"""The device smoke's CPU form: the same code at tiny shapes, and proof that its training steps are the
trainers' own (a spy wraps each trainer's loss method, records the call and returns the real result: if
the smoke computed a loss of its own, the spies would see nothing and these tests fail)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spied(tmp_path_factory):
    """One tiny smoke run with JointSFTTrainer.compute_loss and GRPOTrainer._compute_loss spied on."""
    from trl import GRPOTrainer

    from decision_pipeline.decision.sft.trainer import JointSFTTrainer
    from decision_pipeline.preflight.smoke import smoke
    calls: dict[str, list] = {"sft": [], "grpo": []}
    real_sft, real_grpo = JointSFTTrainer.compute_loss, GRPOTrainer._compute_loss

    def sft_spy(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = real_sft(self, model, inputs, return_outputs, num_items_in_batch)
        calls["sft"].append((tuple(inputs["input_ids"].shape), int((inputs["readout_pos"] >= 0).sum()), out))
        return out

    def grpo_spy(self, model, inputs):
        out = real_grpo(self, model, inputs)
        calls["grpo"].append((tuple(inputs["completion_ids"].shape), self.loss_type, self.beta, out))
        return out

    out = tmp_path_factory.mktemp("smoke") / "smoke.json"
    mp = pytest.MonkeyPatch()
    mp.setattr(JointSFTTrainer, "compute_loss", sft_spy)
    mp.setattr(GRPOTrainer, "_compute_loss", grpo_spy)
    try:
        rows = smoke(tiny=True, steps=2, json_out=out)
    finally:
        mp.undo()
    return rows, calls, json.loads(out.read_text())


def test_sft_step_is_the_joint_trainers_loss(spied):
    rows, calls, _ = spied
    # 2 optimizer steps x 2 micro-batches (accumulation 2) of 2 joint examples of 96 tokens, each with a readout row
    assert [c[:2] for c in calls["sft"]] == [((2, 96), 2)] * 4
    assert all(torch.is_tensor(c[2]) and c[2].requires_grad for c in calls["sft"])
    sft = next(r for r in rows if r.stage == "sft")
    assert sft.tokens == 2 * 2 * 2 * 96 and sft.detail["loss"] == "joint"
    assert sft.detail["chunk"] == 32          # three chunks per row: the chunked loss under the real trainer


def test_heldout_shapes_are_the_tables_held_out_rows():
    """`--shapes heldout` measures exactly the measured table's held-out rows, in its order, with each row's
    LoRA rank and chunk (what `preflight record` matches them back by)."""
    from decision_pipeline.preflight.measured import H200, load
    from decision_pipeline.preflight.profile import profile_params
    from decision_pipeline.preflight.smoke import shape_plan
    held = [r for r in load(H200)["memory"] if r["set"] == "held_out"]
    plan = shape_plan(profile_params("gpu", ROOT), tiny=False, shapes="heldout")
    assert [p[0] for p in plan] == [r["stage"] for r in held]
    sft = [p for p in plan if p[0] == "sft"]
    assert sft == [("sft", r["rows"], r["length"], 1, r["lora_r"], r["chunk"]) for r in held if r["stage"] == "sft"]
    grpo = [p for p in plan if p[0] == "grpo"]
    assert grpo == [("grpo", r["micro"], r["prompt"], r["completion"], r["lora_r"]) for r in held
                    if r["stage"] == "grpo"]


def test_grpo_step_is_trls_loss_with_the_profiles_loss_type(spied):
    from decision_pipeline.preflight.profile import profile_params
    rows, calls, _ = spied
    rl = profile_params("gpu", ROOT)["rl"]
    # 2 optimizer steps of micro-batch 2, completions of exactly 64 tokens; the profile's loss type and beta
    assert [c[:3] for c in calls["grpo"]] == [((2, 64), rl["loss_type"], rl["beta"])] * 2
    grpo = next(r for r in rows if r.stage == "grpo")
    assert grpo.detail["logprob_path"] == "torch"        # no triton on this CPU: TRL's torch tiles, printed
    assert grpo.tokens == 2 * 2 * (32 + 64)


def test_rows_are_written_as_measured(spied):
    rows, _, written = spied
    assert [r["stage"] for r in written["rows"]] == ["readout", "post-chain readout", "sft", "grpo"]
    assert all(r["plan_gib"] is not None and r["plan_gib"] > 0 for r in written["rows"])
    assert all(r.peak_gib is None for r in rows)          # no CUDA: no measured peak is claimed


def test_gpu_smoke_without_gpu_refuses():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the refusal cannot be shown")
    run = subprocess.run(["scripts/gpu_smoke.sh"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 2 and "sees no GPU" in run.stderr and "--tiny" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_profile_shapes_are_the_plans():
    """`make gpu-check`'s smoke measures what the plan sizes for the gpu profile: SFT's longest single example
    (1 x sft.max_length, longer than micro-batch x long_chain_tokens) and GRPO's micro-batch."""
    from decision_pipeline.preflight.profile import profile_params
    from decision_pipeline.preflight.smoke import sft_shape
    gpu = profile_params("gpu", ROOT)
    assert sft_shape(gpu) == (1, gpu["sft"]["max_length"]) == (1, 32768)
    gpu["sft"].update(long_chain_tokens=0, micro_batch_size=2, max_length=4096)
    assert sft_shape(gpu) == (2, 4096)

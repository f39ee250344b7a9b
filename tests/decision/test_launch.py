"""Training through `accelerate launch`: shipped configs, one-line refusals, and 1 vs 2 CPU processes.

The slow tests run the real stage command (`python -m stages.sft`) on a tiny locally
built model: once in one process, once as two gloo DDP processes at the same global
batch, and compare; and a two-process GRPO run killed after a checkpoint resumes to
the same adapter and rollout log.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from decision_pipeline.common.io import write_table
from decision_pipeline.lm.launch import LaunchParams, needs_launch, read_launch_config
from decision_pipeline.questions.schema import QUESTION_SCHEMA, to_row
from decision_pipeline.common.profiles import merged_profile

ROOT = Path(__file__).resolve().parents[2]
MICRO = merged_profile("micro", ROOT)
CONFIGS = {"ddp.yaml": "MULTI_GPU", "fsdp.yaml": "FSDP", "zero2.yaml": "DEEPSPEED", "zero3.yaml": "DEEPSPEED"}
HELPERS = Path(__file__).with_name("rl_helpers.py")


def test_shipped_configs_load_in_accelerate():
    """Each config under configs/accelerate parses with accelerate's own loader, as `accelerate launch` reads it."""
    from accelerate.commands.config.config_args import load_config_from_file
    shipped = {p.name: p for p in (ROOT / "configs" / "accelerate").glob("*.yaml")}
    assert set(shipped) == set(CONFIGS)
    for name, path in shipped.items():
        assert str(load_config_from_file(str(path)).distributed_type).endswith(CONFIGS[name]), name


def test_one_process_trains_in_the_stage_process(monkeypatch):
    """The default (DDP config, 1 process) starts no launcher; 2 processes or a sharding config do."""
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("DECISION_PIPELINE_LAUNCHED", raising=False)
    one = LaunchParams(config="configs/accelerate/ddp.yaml", num_processes=1)
    assert not needs_launch(one, read_launch_config(one, "sft"))
    two = LaunchParams(config="configs/accelerate/ddp.yaml", num_processes=2)
    assert needs_launch(two, read_launch_config(two, "sft"))
    assert needs_launch(one, {"distributed_type": "FSDP"})
    monkeypatch.setenv("DECISION_PIPELINE_LAUNCHED", "1")  # a launched child trains, never launches again
    assert not needs_launch(two, read_launch_config(two, "sft"))


def test_config_is_found_from_another_directory(tmp_path, monkeypatch):
    """A stage run outside the checkout (a scratch directory) reads the same file dvc.yaml names."""
    monkeypatch.chdir(tmp_path)
    one = LaunchParams(config="configs/accelerate/ddp.yaml", num_processes=1)
    assert read_launch_config(one, "sft")["distributed_type"] == "MULTI_GPU"


# ------------------------------------------------------------------ stage inputs (tiny, local)
@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tiny_dir, questions) -> Path:
    """items (12 pool + 12 dev questions), kept chains of four lengths, chosen lr, the tiny base model."""
    root = tmp_path_factory.mktemp("launch")
    shutil.copytree(tiny_dir, root / "base")
    pool, dev = questions[:12], questions[12:24]
    write_table(root / "items.parquet", [to_row(q, "pool") for q in pool] + [to_row(q, "dev") for q in dev],
                QUESTION_SCHEMA)
    kept = [{"id": f"c{i}", "question_id": q["id"], "source": "teacher",
             "text": "<think>\n" + " ".join(["step"] * (1 + 3 * (i % 4))) + "\n</think>\nAnswer: A"}
            for i, q in enumerate(pool)]
    for name in ("kept.jsonl", "chains.jsonl"):
        (root / name).write_text("".join(json.dumps(k) + "\n" for k in kept))
    (root / "choose_lr.json").write_text(json.dumps({"chosen_lr": 0.003}))
    return root


def write_params(root: Path, name: str, sft: dict | None = None, rl: dict | None = None) -> Path:
    """The micro profile with a short fixed-rate SFT: 24 examples, global batch 4, 6 steps = one epoch."""
    data = json.loads(json.dumps(MICRO))
    data["sft"].update(lr_source="fixed", lr=0.003, max_steps=6, batch_size=4, warmup_steps=1, save_steps=3,
                       dev_items=8, threads=1, train_embeddings=True, **(sft or {}))
    data["rl"].update(rl or {})
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def sft_argv(root: Path, params: Path, out: Path) -> list[str]:
    return ["--params", str(params), "--base", str(root / "base"), "--items", str(root / "items.parquet"),
            "--kept", str(root / "kept.jsonl"), "--chains", str(root / "chains.jsonl"),
            "--chosen", str(root / "choose_lr.json"), "--work", str(out / "work"), "--out", str(out / "sft"),
            "--metrics", str(out / "sft.json"), "--plots", str(out / "plots"), "--timings", str(out / "timings.json")]


def run_stage(module: str, argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIPELINE_QUIET": "1", "PYTHONPATH": str(ROOT)}
    env.pop("DECISION_PIPELINE_LAUNCHED", None)
    return subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


# ------------------------------------------------------------------ bad values: one line, nothing written
BAD = {
    "zero-processes": ({"launch": {"config": "configs/accelerate/ddp.yaml", "num_processes": 0}},
                       "sft.launch.num_processes: expected a value >= 1, got 0"),
    "missing-config": ({"launch": {"config": "configs/accelerate/nope.yaml", "num_processes": 2}},
                       "sft.launch.config: configs/accelerate/nope.yaml not found; name one of configs/accelerate/"),
    "uneven-batch": ({"launch": {"config": "configs/accelerate/ddp.yaml", "num_processes": 3}},
                     "sft.batch_size (4) must be divisible by sft.launch.num_processes (3)"),
}
if not torch.cuda.is_available():
    BAD["fsdp-on-cpu"] = ({"launch": {"config": "configs/accelerate/fsdp.yaml", "num_processes": 2}},
                          "configs/accelerate/fsdp.yaml (FSDP) needs GPUs and this machine has none")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_launch_values_fail_in_one_line(case, inputs, tmp_path, capsys, monkeypatch):
    from stages import sft
    monkeypatch.chdir(ROOT)
    changes, expect = BAD[case]
    out = tmp_path / "out"
    assert sft.main(sft_argv(inputs, write_params(tmp_path, case, changes), out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expect in err[0], err
    assert not out.exists()


def test_rl_step_batch_must_split_evenly(tmp_path):
    """rl's step batch (completions per optimizer step) must split evenly over the processes."""
    from decision_pipeline.common.errors import PipelineError
    from decision_pipeline.common.params import load_section
    from decision_pipeline.decision.rl.config import RLParams
    rl = MICRO["rl"]
    n = rl["prompts_per_round"] * rl["num_generations"] // rl["steps_per_generation"] + 1  # never a divisor
    params = write_params(tmp_path, "rl", rl={"launch": {"config": "configs/accelerate/ddp.yaml", "num_processes": n}})
    with pytest.raises(PipelineError, match=rf"must be divisible by launch.num_processes \({n}\)"):
        load_section(RLParams, "rl", params)


# ------------------------------------------------------------------ the proof: 1 vs 2 CPU processes
@pytest.fixture(scope="module")
def one_process(inputs, tmp_path_factory) -> Path:
    """The one-process SFT both slow comparisons below measure against (DDP config, 1 process): the stage's
    `main` in this process (what `python -m stages.sft` runs with one process), run once for the module."""
    from stages import sft
    root = tmp_path_factory.mktemp("one_process")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        params = write_params(root, "p1", {"launch": {"config": "configs/accelerate/ddp.yaml", "num_processes": 1}})
        assert sft.main(sft_argv(inputs, params, root / "p1")) == 0
    finally:
        os.chdir(cwd)
    return root / "p1"


@pytest.mark.slow
def test_two_cpu_processes_give_the_one_process_loss(inputs, tmp_path, monkeypatch, capsys, one_process):
    """Same tiny SFT (6 steps, global batch 4, embedding delta on) in 1 process and in 2 gloo processes.

    Tolerance: 1e-4 relative on the final and the mean training loss, 1e-4 absolute on
    the dev readout NLL. Why: each process computes its share of the *global* batch loss
    (`sft/trainer.py` global_joint_losses), so both runs take the same gradient step; they
    differ only in float32 summation order (each process sums half the batch, gloo adds
    the two halves), which after 6 AdamW steps is below 1e-6 here. Averaging per-process
    mean losses instead (what plain DDP does) moves the final loss by 5e-3 and the mean
    training loss by 5e-2 on these unequal-length examples: the test would fail.
    The one-process run is the stage's `main` in this process (what `python -m
    stages.sft` runs with one process); the two-process one is the stage command.
    """
    monkeypatch.chdir(ROOT)
    launch = {2: {"launch": {"config": "configs/accelerate/ddp.yaml", "num_processes": 2}}}
    proc = run_stage("stages.sft", sft_argv(inputs, write_params(tmp_path, "p2", launch[2]), tmp_path / "p2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("[sft] done in") == 1  # rank 0 alone prints the summary line
    runs = {}
    for n in (1, 2):
        out = one_process if n == 1 else tmp_path / f"p{n}"
        runs[n] = json.loads((out / "sft.json").read_text())
        parts = json.loads((out / "plots" / "loss_parts.json").read_text())
        assert [r["step"] for r in parts] == list(range(1, 7))  # one loss row per step, written once
        assert (out / "sft" / "model.safetensors").is_file() and (out / "sft" / "adapter").is_dir()
    one, two = runs[1], runs[2]
    assert two["final"]["chain_loss"] == pytest.approx(one["final"]["chain_loss"], rel=1e-4)
    assert two["final"]["readout_loss"] == pytest.approx(one["final"]["readout_loss"], rel=1e-4, abs=1e-6)
    assert two["train_loss"] == pytest.approx(one["train_loss"], rel=1e-4)
    assert two["dev"]["nll"] == pytest.approx(one["dev"]["nll"], abs=1e-4)
    ckpt = tmp_path / "p2" / "work" / "checkpoint-6"  # a resumable checkpoint: one adapter, each rank's RNG
    assert {p.name for p in ckpt.glob("rng_state_*.pth")} == {"rng_state_0.pth", "rng_state_1.pth"}
    assert (ckpt / "adapter_model.safetensors").is_file() and (ckpt / "optimizer.pt").is_file()


@pytest.mark.slow
def test_two_processes_with_micro_batches_give_the_one_process_loss(inputs, tmp_path, monkeypatch, capsys,
                                                                    one_process):
    """sft.micro_batch_size under 2 gloo processes: global batch 4 = 2 processes x micro 1 x accumulation 2,
    and the joint loss in 8-position chunks (sft.loss_chunk_tokens; the one-process run takes each row whole).

    Each micro-batch's share is its sums over the step's all-reduced totals, so the run must match
    the one-process whole-batch run as the plain 2-process run does (same tolerances, same reason); the
    chunks' LM-head calls run outside DDP's forward, under checkpoint, and their gradients still reduce."""
    monkeypatch.chdir(ROOT)
    micro = {"micro_batch_size": 1, "loss_chunk_tokens": 8,
             "launch": {"config": "configs/accelerate/ddp.yaml", "num_processes": 2}}
    proc = run_stage("stages.sft", sft_argv(inputs, write_params(tmp_path, "m2", micro), tmp_path / "m2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = (json.loads((d / "sft.json").read_text()) for d in (one_process, tmp_path / "m2"))
    parts = json.loads((tmp_path / "m2" / "plots" / "loss_parts.json").read_text())
    assert [r["step"] for r in parts] == list(range(1, 7))  # one loss row per optimizer step
    assert two["final"]["chain_loss"] == pytest.approx(one["final"]["chain_loss"], rel=1e-4)
    assert two["final"]["readout_loss"] == pytest.approx(one["final"]["readout_loss"], rel=1e-4, abs=1e-6)
    assert two["train_loss"] == pytest.approx(one["train_loss"], rel=1e-4)
    assert two["dev"]["nll"] == pytest.approx(one["dev"]["nll"], abs=1e-4)


def _launch_rl(model_dir: Path, work: Path) -> dict:
    """The toy GRPO run of rl_helpers as 2 gloo processes; rank 0 prints the adapter digest."""
    env = {**os.environ, "PIPELINE_QUIET": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", "configs/accelerate/ddp.yaml",
           "--num_processes", "2", "--mixed_precision", "no", str(HELPERS), str(model_dir), str(work), "6"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1  # only rank 0 reports
    return json.loads(lines[0])


@pytest.mark.slow
def test_two_process_grpo_resumes_to_the_same_adapter_and_log(tiny_dir, questions, tmp_path):
    """2-process GRPO: the rollout log holds every completion once (rank 0 writes all ranks' rows), and a
    run stopped after checkpoint-4 (its later checkpoint removed) resumes to the same adapter and log."""
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_dir, model_dir)
    (model_dir / "questions.json").write_text(json.dumps(questions))
    full = _launch_rl(model_dir, tmp_path / "full")
    assert full["start"] == 0 and full["moved"] > 0
    rows = [json.loads(line) for line in (tmp_path / "full" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == len({r["id"] for r in rows}) == 3 * 4 * 4  # rounds x prompts x generations
    killed = tmp_path / "killed"
    shutil.copytree(tmp_path / "full", killed)
    shutil.rmtree(killed / "checkpoint-6")  # as if killed after checkpoint-4 was marked whole
    again = _launch_rl(model_dir, killed)
    assert again["start"] == 4 and again["digest"] == full["digest"]
    assert (killed / "rollouts.jsonl").read_bytes() == (tmp_path / "full" / "rollouts.jsonl").read_bytes()

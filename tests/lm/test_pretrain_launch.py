"""Pretraining through `accelerate launch`: 1 vs 2 gloo CPU processes give the same run.

The slow test runs the real stage command (`python -m stages.pretrain`) on a tiny
pool, once in one process and once as two DDP processes at the same global batch,
and compares the loss log, the held-out perplexity and the saved weights. A kill
and resume under the other process count is covered too: a checkpoint holds the
whole state and no rank draws random numbers, so it resumes under any count.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_json, write_table
from decision_pipeline.common.params import load_section
from decision_pipeline.curation.documents import DEV_SCHEMA, POOL_SCHEMA
from decision_pipeline.lm.training import PretrainParams
from decision_pipeline.common.profiles import merged_profile

ROOT = Path(__file__).resolve().parents[2]
MICRO = merged_profile("micro", ROOT)


def write_params(root: Path, name: str, processes: int, **pretrain) -> Path:
    """The micro profile's pretrain at fp32 (see the tolerance below), one seed, 4 windows per step."""
    data = json.loads(json.dumps(MICRO))
    data["pretrain"].update(batch_size=4, seeds=1, save_steps=5, threads=1, bf16=False,
                            launch={"config": "configs/accelerate/ddp.yaml", "num_processes": processes}, **pretrain)
    data["curate"]["budget_tokens"] = 40000
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pretrain_launch")
    docs = [{"id": f"d{i}", "text": " ".join(f"word{(i * 7 + j) % 50} is {j}." for j in range(40)),
             "safety_score": 0, "meta_json": "{}"} for i in range(300)]
    write_table(root / "pool.parquet", docs, POOL_SCHEMA)
    write_table(root / "heldout.parquet", [{"id": f"h{i}", "text": docs[i]["text"][::-1], "register": "news"}
                                           for i in range(4)], DEV_SCHEMA)
    (root / "selection").mkdir()
    write_json(root / "selection" / "selection.json", {"ids": [d["id"] for d in docs]})
    return root


def argv(inputs: Path, params: Path, out: Path, tokenizer: str) -> list[str]:
    return ["curated", "--params", str(params), "--selection", str(inputs / "selection"),
            "--pool", str(inputs / "pool.parquet"), "--heldout", str(inputs / "heldout.parquet"),
            "--tokenizer", tokenizer, "--out", str(out / "model"), "--work", str(out / "work"),
            "--plot", str(out / "loss.json"), "--metrics", str(out / "metrics.json"),
            "--timings", str(out / "timings.json")]


def run_stage(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIPELINE_QUIET": "1", "PYTHONPATH": str(ROOT)}
    env.pop("DECISION_PIPELINE_LAUNCHED", None)
    return subprocess.run([sys.executable, "-m", "stages.pretrain", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def one_process(inputs, tiny_dir, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The straight one-process run (its output folder and the finished command): both slow tests compare
    against this same run, so it runs once."""
    root = tmp_path_factory.mktemp("one_process")
    out = root / "p1"
    proc = run_stage(argv(inputs, write_params(root, "p1", 1), out, tiny_dir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_batch_must_split_evenly_over_the_processes(tmp_path):
    with pytest.raises(PipelineError, match=r"pretrain.batch_size \(4\) must be divisible by "
                                            r"pretrain.launch.num_processes \(3\)"):
        load_section(PretrainParams, "pretrain", write_params(tmp_path, "uneven", 3))


@pytest.mark.slow
def test_two_cpu_processes_give_the_one_process_run(inputs, tiny_dir, tmp_path, one_process):
    """Tolerance: 1e-5 relative on every logged loss and the held-out perplexity, 1e-4
    absolute on every weight. Why: every window holds `seq_len` tokens, so the mean of
    the two processes' mean losses is the one-process loss and DDP's averaged gradient
    is the one-process gradient; the runs differ only in float32 summation order. bf16
    autocast is off here because bf16 rounds each process's half-batch matmul on its
    own, which is a different (larger) tolerance question than the one this answers.
    """
    runs = {}
    for n in (1, 2):
        if n == 1:
            out, proc = one_process
        else:
            out = tmp_path / f"p{n}"
            proc = run_stage(argv(inputs, write_params(tmp_path, f"p{n}", n), out, tiny_dir))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.count("[pretrain@curated] done in") == 1  # rank 0 alone prints the summary line
        runs[n] = {"log": json.loads((out / "loss.json").read_text()),
                   "metrics": json.loads((out / "metrics.json").read_text()),
                   "weights": load_file(str(out / "model" / "model.safetensors"))}
    one, two = runs[1], runs[2]
    assert len(one["log"]) == len(two["log"]) > 20
    for a, b in zip(one["log"], two["log"]):
        assert a["step"] == b["step"] and b["loss"] == pytest.approx(a["loss"], rel=1e-5)
    assert two["metrics"]["heldout"]["ppl"] == pytest.approx(one["metrics"]["heldout"]["ppl"], rel=1e-5)
    assert one["weights"].keys() == two["weights"].keys()
    worst = max(float((one["weights"][k] - two["weights"][k]).abs().max()) for k in one["weights"])
    assert worst < 1e-4
    moved = sum(float(v.float().abs().sum()) for v in one["weights"].values())
    assert moved > 0 and one["log"][-1]["loss"] < one["log"][0]["loss"]  # it trained
    print(f"\npretrain 1 vs 2 processes: final loss {one['log'][-1]['loss']} / {two['log'][-1]['loss']}, "
          f"held-out ppl {one['metrics']['heldout']['ppl']} / {two['metrics']['heldout']['ppl']}, "
          f"largest weight difference {worst:.2e}")


def wait_until_gone(needle: str, timeout: float = 60.0) -> None:
    """Wait until no process has `needle` in its command line (the elastic agent's workers live in
    sessions of their own and get their SIGKILL only when their parent has exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and needle.encode() in (proc / "cmdline").read_bytes():
                    alive.append(proc.name)
            except OSError:
                continue
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes {alive} still run {needle} {timeout} s after the kill")


def checkpoint_step(work: Path) -> int:
    try:
        return int(torch.load(work / "seed-0.pt", weights_only=False)["step"])
    except (FileNotFoundError, EOFError, RuntimeError):
        return 0


@pytest.mark.slow
def test_a_killed_two_process_run_resumes_in_one_process(inputs, tiny_dir, tmp_path, one_process):
    """kill -9 of the 2-process run (launcher and children) after a checkpoint; a 1-process rerun resumes
    there and ends with the weights of a straight 1-process run (same tolerance as above)."""
    straight, _ = one_process  # the straight 1-process run: the same params as the resumed run's
    total = len(json.loads((straight / "loss.json").read_text()))
    run = tmp_path / "killed"
    env = {**os.environ, "PIPELINE_QUIET": "1", "PYTHONPATH": str(ROOT)}
    env.pop("DECISION_PIPELINE_LAUNCHED", None)
    proc = subprocess.Popen([sys.executable, "-m", "stages.pretrain",
                             *argv(inputs, write_params(tmp_path, "two", 2), run, tiny_dir)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while checkpoint_step(run / "work") < 10 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher; the training processes die with it (PR_SET_PDEATHSIG)
    proc.wait()
    wait_until_gone(str(run))  # a worker can finish one more checkpoint in the moment its parent takes to exit
    killed_at = checkpoint_step(run / "work")
    assert 0 < killed_at < total, f"checkpoint at {killed_at} of {total}: no kill mid-run"
    assert not (run / "model").exists() and not (run / "metrics.json").exists()  # nothing partial is an output
    again = run_stage(argv(inputs, write_params(tmp_path, "one_again", 1), run, tiny_dir))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming from the checkpoint at step {killed_at} of {total}" in again.stderr + again.stdout
    a = load_file(str(straight / "model" / "model.safetensors"))
    b = load_file(str(run / "model" / "model.safetensors"))
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-4

"""Multi-process training through `accelerate launch`: the params key, the re-launch, and rank 0.

Why a re-launch and not `accelerate launch` in dvc.yaml: the stage command stays
`python -m stages.<name>` (one entry point per stage, a test checks it), bad launch
settings fail as one line before any process starts, and the default (DDP with one
process) runs in the stage's own process exactly as before: no launcher, no extra
interpreter start-up. More processes, or a sharding config (FSDP, DeepSpeed), re-run
the same command under `accelerate launch`; the children see
`DECISION_PIPELINE_LAUNCHED=1` and train.

Under several processes every rank computes the same data and trains its share of
each global batch; only rank 0 writes outputs (models/, metrics/, plots/, the
work directory's logs). `RANK`/`WORLD_SIZE` come from the launcher's environment,
so these helpers cost nothing and need no process group in the single-process case.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import yaml
from transformers import Trainer

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.params import LaunchParams  # re-exported: params live apart from torch

T = TypeVar("T")
LAUNCHED_ENV = "DECISION_PIPELINE_LAUNCHED"
CONFIG_DIR = "configs/accelerate"
REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout holding dvc.yaml and configs/
IN_PROCESS = ("NO", "MULTI_GPU")  # with one process these are a plain run: no launcher needed
GPU_ONLY = ("FSDP", "DEEPSPEED")  # MULTI_GPU runs on CPU too (gloo), these do not




def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main() -> bool:
    """True in the process that writes outputs (rank 0, or the only process)."""
    return rank() == 0


def launched() -> bool:
    """True inside a process started by `relaunch` (it must train, not launch again)."""
    return os.environ.get(LAUNCHED_ENV) == "1"


def threads_per_process(threads: int) -> int:
    """CPU threads for each process: the section's `threads` split across the processes (at least 1)."""
    return max(1, threads // world_size())


def config_path(config: str) -> Path:
    """The config file: as given when it exists from here, else relative to the repository root.

    Why the root: `dvc.yaml` names it as a dep relative to the root, and a stage run from
    another directory (a test's scratch directory) must find the same file.
    """
    path = Path(config)
    return path if path.is_absolute() or path.is_file() else REPO_ROOT / path


def read_launch_config(launch: LaunchParams, section: str, params_path: str = "params.yaml") -> dict:
    """The accelerate config as a mapping, checked against `num_processes` and this machine.

    Every refusal is one line naming the key and the fix, raised before any process starts.
    """
    import torch

    key = f"{params_path}: {section}.launch"
    path = config_path(launch.config)
    shipped = ", ".join(sorted(p.name for p in (REPO_ROOT / CONFIG_DIR).glob("*.yaml"))) or "none found"
    if not path.is_file():
        raise PipelineError(f"{key}.config: {launch.config} not found; name one of {CONFIG_DIR}/ ({shipped})")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise PipelineError(f"{key}.config: {launch.config} is not valid YAML ({type(exc).__name__})") from None
    if not isinstance(config, dict) or "distributed_type" not in config:
        raise PipelineError(f"{key}.config: {launch.config} is not an accelerate config (no distributed_type)")
    kind = str(config["distributed_type"])
    if kind == "NO" and launch.num_processes > 1:
        raise PipelineError(f"{key}.num_processes is {launch.num_processes} but {launch.config} runs one process "
                            f"(distributed_type NO); use {CONFIG_DIR}/ddp.yaml")
    gpus = torch.cuda.device_count()
    if kind in GPU_ONLY and gpus == 0:
        raise PipelineError(f"{key}.config: {launch.config} ({kind}) needs GPUs and this machine has none; "
                            f"use {CONFIG_DIR}/ddp.yaml (gloo DDP over CPU processes)")
    if gpus and not config.get("use_cpu", False) and launch.num_processes > gpus:
        raise PipelineError(f"{key}.num_processes is {launch.num_processes} but this machine has {gpus} GPU(s)")
    return config


def needs_launch(launch: LaunchParams, config: dict) -> bool:
    """Whether the stage must re-run under `accelerate launch` (else it trains in its own process)."""
    return not launched() and (launch.num_processes > 1 or str(config["distributed_type"]) not in IN_PROCESS)


def relaunch(module: str, argv: Sequence[str] | None, launch: LaunchParams, mixed_precision: str) -> None:
    """Run `python -m module argv` under `accelerate launch` with the config and process count.

    `mixed_precision` comes from params (the config's own value is overridden), so the
    config chooses only the topology. A failed child raises one PipelineError line
    after the children's own output.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config_path(launch.config)),
           "--num_processes", str(launch.num_processes), "--mixed_precision", mixed_precision,
           "-m", module, *args]
    env = {**os.environ, LAUNCHED_ENV: "1"}
    rc = subprocess.call(cmd, env=env)
    if rc != 0:
        raise PipelineError(f"{module}: accelerate launch of {launch.num_processes} process(es) with "
                            f"{launch.config} exited with code {rc}; see the processes' messages above")


def mixed_precision(bf16_on_cpu: bool) -> str:
    """accelerate's mixed-precision mode for a run: bf16 on a GPU, on CPU only when params ask for it."""
    import torch

    return "bf16" if torch.cuda.is_available() or bf16_on_cpu else "no"


def train_here(launch: LaunchParams, section: str, module: str, argv: Sequence[str] | None,
               params_path: str, bf16_on_cpu: bool = False) -> bool:
    """Check `<section>.launch`; re-run the stage under accelerate when it asks for that.

    Returns True when this process trains (one process, or a launched child) and False
    when the launched children have done the work. Raises the one-line error of a bad
    config before anything starts.
    """
    config = read_launch_config(launch, section, params_path)
    if needs_launch(launch, config):
        relaunch(module, argv, launch, mixed_precision(bf16_on_cpu))
        return False
    if launched():
        die_with_launcher()
    bind_device()
    return True


def die_with_parent(parent: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG); the one place it is set up.

    If the parent (`parent`, default the current one) is already gone when the request takes
    effect, the process kills itself. Elsewhere than Linux this is a no-op.
    """
    import ctypes
    import signal

    parent = os.getppid() if parent is None else parent
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


def die_with_launcher() -> None:
    """Training processes die with their launcher.

    Why: torch's elastic agent starts each worker in a session of its own, so a `kill -9`
    of the stage (the launcher) left the workers training on and writing checkpoints into
    the work directory while the rerun read it.
    """
    die_with_parent()


def bind_device() -> None:
    """Point each launched process at its own GPU before a model is loaded ("cuda" = the local device)."""
    import torch

    if launched() and torch.cuda.is_available() and "LOCAL_RANK" in os.environ:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))


def barrier() -> None:
    """Wait for every process (no-op with one): rank 0 has prepared a directory the others read."""
    if world_size() > 1:
        import torch
        from accelerate import PartialState

        PartialState(cpu=not torch.cuda.is_available()).wait_for_everyone()


def on_main_then_all(step: Callable[[], T]) -> T | None:
    """Run `step` on rank 0 only, then let every process continue past a barrier."""
    result = step() if is_main() else None
    barrier()
    return result


def gather_objects(local: list[Any]) -> list[Any]:
    """Every process's `local` items concatenated in rank order (the list itself with one process)."""
    if world_size() == 1:
        return local
    import torch.distributed as dist

    parts: list[Any] = [None] * world_size()
    dist.all_gather_object(parts, local)
    return [item for part in parts for item in part]


def finish() -> None:
    """Tear the process group down at the end of a launched process (torch warns otherwise)."""
    if world_size() > 1:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def consolidated(trainer: Any, work_dir: str | Path) -> Any:
    """The trained (PEFT) model on rank 0 in eval mode; None on every other rank.

    One process or DDP: the trainer's own model (every rank holds the full weights).
    FSDP and DeepSpeed shard them, so rank 0 alone cannot merge or save: the trainer's
    `save_model` (a collective every rank joins) writes the full adapter once, and rank 0
    reloads it onto a fresh copy of the base.
    """
    if not (trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled):
        if not is_main():
            return None
        trainer.model.eval()
        return trainer.model
    final = Path(work_dir) / "final-adapter"
    trainer.save_model(str(final))
    barrier()
    if not is_main():
        return None
    from peft import PeftModel

    from decision_pipeline.lm.model import load_model

    base = load_model(trainer.model.get_base_model().name_or_path)
    model = PeftModel.from_pretrained(base, str(final))
    model.eval()
    return model


class CpuProcessesResume(Trainer):
    """Resuming under several CPU processes: load the optimizer state onto "cpu".

    Why: with more than one process transformers loads `optimizer.pt` with
    `map_location=args.device`, which for gloo DDP is `cpu:0`, a location
    `torch.load` cannot restore to, so every multi-process CPU resume failed.
    Mixed in between TRL's trainer and `Trainer`, so TRL's own override still runs.
    """

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        sharded = self.is_fsdp_enabled or self.is_deepspeed_enabled
        if checkpoint is None or self.args.world_size == 1 or self.args.device.type != "cpu" or sharded:
            return super()._load_optimizer_and_scheduler(checkpoint)
        import torch
        from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME

        self.optimizer.load_state_dict(torch.load(Path(checkpoint) / OPTIMIZER_NAME, map_location="cpu",
                                                  weights_only=True))
        self.lr_scheduler.load_state_dict(torch.load(Path(checkpoint) / SCHEDULER_NAME, weights_only=True))

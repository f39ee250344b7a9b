"""Stage logging: progress bars and the one summary line each stage prints.

Why: a person running `dvc repro` should see that long loops move and, at the
end of each stage, its key numbers on one line.
"""
from __future__ import annotations

import functools
import os
import sys
import time
from typing import Any, Callable, Iterable, TypeVar

from tqdm.auto import tqdm

from decision_pipeline.common import raycluster
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import PARAMS_FILE

T = TypeVar("T")


def bars_enabled() -> bool:
    """Bars on a terminal only: in a log file (CI, `dvc repro > log`) they are carriage-return noise.

    PIPELINE_QUIET=1 (the tests) turns them off, PIPELINE_PROGRESS=1 forces them on.
    """
    if os.environ.get("PIPELINE_QUIET") == "1":
        return False
    isatty = getattr(sys.stderr, "isatty", None)  # stderr can be None or a bare writer
    return os.environ.get("PIPELINE_PROGRESS") == "1" or bool(isatty and isatty())


# A training run's plain progress line (off a terminal) comes at least this often; issue #36 asks for
# SFT progress within every 30 s. PIPELINE_PROGRESS_SECONDS overrides it per run.
PROGRESS_SECONDS = 20.0


def progress_mode() -> str:
    """How a training run reports: "bar" where `bars_enabled()`, "lines" (a plain line every
    `progress_seconds()`: a log file, CI), "off" under PIPELINE_QUIET=1 (the tests)."""
    if os.environ.get("PIPELINE_QUIET") == "1":
        return "off"
    return "bar" if bars_enabled() else "lines"


def progress_seconds() -> float:
    """The progress line's cadence: PIPELINE_PROGRESS_SECONDS, else `PROGRESS_SECONDS`."""
    raw = os.environ.get("PIPELINE_PROGRESS_SECONDS")
    if raw is None or not raw.strip():
        return PROGRESS_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise PipelineError(f"PIPELINE_PROGRESS_SECONDS={raw!r}: expected a number of seconds > 0 "
                            f"(unset it for the default {PROGRESS_SECONDS:g})")
    return value


def progress(iterable: Iterable[T], desc: str, total: int | None = None, unit: str = "it") -> Iterable[T]:
    """A tqdm bar on stderr when `bars_enabled()`; otherwise the plain iterable's items."""
    return tqdm(iterable, desc=desc, total=total, unit=unit, leave=False, dynamic_ncols=True,
                disable=not bars_enabled(), file=sys.stderr)


def info(stage: str, message: str) -> None:
    print(f"[{stage}] {message}", file=sys.stderr, flush=True)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summary(stage: str, started: float, **numbers: Any) -> None:
    """Print the stage's one summary line: `[stage] done in 12.3s: key=value ...`."""
    parts = " ".join(f"{k}={_fmt(v)}" for k, v in numbers.items())
    print(f"[{stage}] done in {time.time() - started:.1f}s: {parts}", flush=True)


def params_file_named(message: str, argv: list[str] | None) -> str:
    """`message` naming the params file the stage actually read.

    Why: many checks run far from the loader and say `params.yaml: key ...`, the file DVC passes;
    a stage run by hand with `--params other.yaml` must name that file instead."""
    args = sys.argv[1:] if argv is None else list(argv)
    path = None
    for i, arg in enumerate(args):
        if arg == "--params" and i + 1 < len(args):
            path = args[i + 1]
        elif arg.startswith("--params="):
            path = arg.split("=", 1)[1]
    if path and path != PARAMS_FILE and message.startswith(PARAMS_FILE + ":"):
        return path + message[len(PARAMS_FILE):]
    return message


def stage_main(func: Callable[[list[str] | None], Any] | None = None, *, ray_exit: bool = False) -> Any:
    """Wrap a stage's main(): a PipelineError becomes one stderr line (naming the `--params` file
    where the message names the params file) and exit code 2.

    `@stage_main(ray_exit=True)`: a run that attached to a Ray cluster ends the process with
    `os._exit(0)` once main returns. A Ray driver can hang in interpreter shutdown after a replica was
    restarted (seen once in the suite: every output written, the process asleep for minutes); the
    outputs are complete and closed by then, so the process ends there."""
    if func is None:
        return functools.partial(stage_main, ray_exit=ray_exit)

    @functools.wraps(func)
    def wrapper(argv: list[str] | None = None) -> int:
        if not bars_enabled() and "transformers" in sys.modules:
            from transformers.utils import logging as hf_logging
            hf_logging.disable_progress_bar()  # its weight-loading bar, same rule as ours
        joins = raycluster.joins()
        try:
            func(argv)
        except PipelineError as exc:
            print(f"error: {params_file_named(str(exc), argv)}", file=sys.stderr)
            return 2
        if ray_exit and raycluster.joins() > joins:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return 0
    return wrapper

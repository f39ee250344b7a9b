"""The base revision's metrics recomputed on this machine, for a review that compares like with like.

Why: float kernels can differ between machines from the first step of pretraining, so main's committed
metrics, produced elsewhere, may differ from a rerun of main here by more than a one-line change does (a
fresh clone on another 2-core CPU once changed 61 tracked files, #34). `make review BASE=main RECOMPUTE=1`
checks the base out in a temporary git worktree that shares this checkout's DVC cache, hands it this
workspace's outputs and dvc.lock, and runs `dvc repro` there: DVC then reruns exactly the stages whose
code, params or inputs differ between the base and this workspace (and what they feed), so only what the
change under review touches costs time, and the review shows only what the change moved. DVC's own run
cache cannot do this here: it skips every stage with a `cache: false` output that is not a declared metric
or plot, which is how the detail metrics files stay out of `dvc exp show`.

A person can follow it and stop it: a line for each stage the base reruns (and one every 30 s while a
stage runs); Ctrl-C or SIGTERM ends it within a second (DVC and its stages run in a process group of
their own, killed as a group) and the worktree is removed on every way out. A review killed outright
(`kill -9`, a closed laptop) leaves its worktree registered: the next review finds it by the owner
file beside it (a process id no longer alive) and removes it, and the temporary checkout, first.
"""
from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.dvcfiles import lock_files
from decision_pipeline.common.yamlio import load_yaml


DVC = [sys.executable, "-m", "dvc"]  # this environment's DVC, whatever PATH says
PREFIX = "review-base-"              # the temporary directory holding the base's worktree (`<dir>/base`)
OWNER = "owner"                      # beside it: "<review's pid> <process group of what it runs>"
HEARTBEAT_S = 30.0
GRACE_S = 0.5                        # SIGTERM to SIGKILL for a stopped command's process group


class Stopped(Exception):
    """SIGTERM or SIGHUP while the base is recomputed (Ctrl-C is KeyboardInterrupt)."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """End a command and everything it started (its own process group): SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue


def _run(cmd: list[str], cwd: Path, what: str, on_line: Callable[[str | None], None] | None = None,
         started: Callable[[int], None] | None = None) -> str:
    """Run `cmd` in a process group of its own, its output handed line by line to `on_line` (None once a
    second while it is quiet); an interrupt kills the group before it propagates. Its output, or one line."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True)
    if started is not None:
        started(proc.pid)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: ([lines.put(x) for x in proc.stdout], lines.put(None)), daemon=True)
    reader.start()
    out: list[str] = []
    try:
        while True:
            try:
                line = lines.get(timeout=1.0)  # interruptible: Ctrl-C lands here within a second
            except queue.Empty:
                if on_line is not None:
                    on_line(None)
                continue
            if line is None:
                break
            out.append(line)
            if on_line is not None:
                on_line(line)
        proc.wait()
    except BaseException:
        _kill_group(proc)
        raise
    text = "".join(out)
    if proc.returncode != 0:
        last = text.strip().splitlines() or ["failed"]
        raise PipelineError(f"{what}: {' '.join(cmd)} exited {proc.returncode}: {last[-1]}")
    return text


def cache_dir(root: Path) -> Path:
    """This checkout's DVC cache directory (`dvc cache dir`), absolute."""
    out = _run([*DVC, "cache", "dir"], root, "the DVC cache").strip().splitlines()
    if not out:
        raise PipelineError("dvc cache dir printed nothing; run `dvc cache dir` to see why")
    path = Path(out[-1])
    return path if path.is_absolute() else (root / path).resolve()


def _outputs(lock: Path) -> list[str]:
    """Every output path a dvc.lock records (the stages' `outs`)."""
    data = load_yaml(lock.read_text(encoding="utf-8"), str(lock))
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        raise PipelineError(f"{lock}: no stages recorded; run the pipeline (`make run`) before a review")
    return sorted({o["path"] for st in stages.values() if isinstance(st, dict)
                   for o in st.get("outs") or [] if isinstance(o, dict) and "path" in o})


def seed_locks(root: Path, tree: Path, locks: list[Path]) -> None:
    """This workspace's dvc.lock files into the base's worktree, each beside its pipeline file. A part's lock
    whose part the base lacks (a base from before the pipeline was split into pipelines/<part>/dvc.yaml) goes
    into the base's root dvc.lock instead, where its one dvc.yaml declares those stages: the entries record
    the same paths and hashes, so DVC skips what did not change rather than rerunning the whole part."""
    orphans: dict[str, Any] = {}
    for lock in locks:
        rel = lock.relative_to(root)
        if rel.parent != Path(".") and not (tree / rel.parent / "dvc.yaml").is_file():
            orphans.update((load_yaml(lock.read_text(encoding="utf-8"), str(lock)) or {}).get("stages") or {})
            continue
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lock, tree / rel)
    if orphans:
        import yaml

        target = tree / "dvc.lock"
        data = (load_yaml(target.read_text(encoding="utf-8"), str(target)) if target.is_file() else None) or {}
        stages = dict(data.get("stages") or {})
        stages.update({name: entry for name, entry in orphans.items() if name not in stages})
        target.write_text(yaml.safe_dump({"schema": data.get("schema", "2.0"), "stages": stages}, sort_keys=False),
                          encoding="utf-8")


def _copy(src: Path, dst: Path) -> None:
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    elif dst.exists() or dst.is_symlink():
        dst.unlink()
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _worktrees(root: Path) -> list[Path]:
    proc = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=root, capture_output=True, text=True)
    return [Path(line[9:]) for line in proc.stdout.splitlines() if line.startswith("worktree ")]


def remove_stale(root: Path, say: Callable[[str], None] = _say) -> list[Path]:
    """Remove the base worktrees earlier reviews left behind (their owner is no longer alive), after killing
    what they still ran there; a review running now keeps its own. Returns the worktrees removed."""
    subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True)
    removed = []
    for tree in _worktrees(root):
        if tree.name != "base" or not tree.parent.name.startswith(PREFIX):
            continue
        try:
            pid, group = (int(x) for x in (tree.parent / OWNER).read_text().split())
        except (OSError, ValueError):
            pid, group = 0, 0
        if pid and pid != os.getpid() and _alive(pid):
            continue
        try:  # what it ran may outlive it (its own process group): only if it still works in that tree
            if group and os.readlink(f"/proc/{group}/cwd").startswith(str(tree)):
                os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=root, capture_output=True)
        shutil.rmtree(tree.parent, ignore_errors=True)
        removed.append(tree)
        say(f"[review] removed the base worktree a stopped review left behind: {tree}")
    subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True)
    return removed


class _Progress:
    """What `dvc repro` in the base's worktree is doing, as a line per stage it reruns and a heartbeat."""

    def __init__(self, base: str, say: Callable[[str], None]) -> None:
        self.base, self.say = base, say
        self.started = self.last = time.monotonic()
        self.ran, self.skipped, self.stage = 0, 0, ""

    def __call__(self, line: str | None) -> None:
        now = time.monotonic()
        if line is not None and line.startswith("Running stage '"):
            self.ran += 1
            self.stage = line.split("'")[1]
            self.say(f"[review] {self.base}: stage '{self.stage}' reruns (#{self.ran}; {self.skipped} unchanged so "
                     f"far; {now - self.started:.0f} s)")
            self.last = now
        elif line is not None and "didn't change, skipping" in line:
            self.skipped += 1
        elif now - self.last >= HEARTBEAT_S:
            doing = f"stage '{self.stage}'" if self.stage else "checking stages"
            self.say(f"[review] {self.base}: still reproducing ({doing}; {now - self.started:.0f} s)")
            self.last = now


def _stop_on_signals() -> dict:
    """SIGTERM and SIGHUP raise Stopped (as Ctrl-C raises KeyboardInterrupt), so the worktree is removed."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(signum: int, _frame: Any) -> None:
        raise Stopped(signal.Signals(signum).name)

    return {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}


def recompute(base: str, read_metrics: Callable[[Path], dict[str, Any]], root: Path = Path("."),
              say: Callable[[str], None] = _say) -> tuple[dict[str, Any], dict[str, int]]:
    """(metrics, {"ran": n, "skipped": n}) of `base` reproduced here; the worktree is removed after, however
    it ends (an interrupt is one line: PipelineError).

    `read_metrics(path)` reads a checkout's metrics (review.workspace_metrics), so both sides of the
    review are read by the same code.
    """
    root = root.resolve()
    locks = lock_files(root)
    if not locks:
        raise PipelineError("dvc.lock: missing; run the pipeline (`make run`) before a review")
    outputs = sorted({rel for lock in locks for rel in _outputs(lock)})
    remove_stale(root, say)
    cache = cache_dir(root)
    tmp = Path(tempfile.mkdtemp(prefix=PREFIX))
    tree = tmp / "base"
    owner = tmp / OWNER
    owner.write_text(f"{os.getpid()} 0\n")
    previous = _stop_on_signals()
    try:
        say(f"[review] checking {base} out in {tree} (removed afterwards)")
        _run(["git", "worktree", "add", "--detach", str(tree), base], root, f"--base {base}")
        _run([*DVC, "cache", "dir", "--local", str(cache)], tree, "sharing the DVC cache")
        # this workspace's run as the starting point: a stage whose code, params and inputs are the
        # same at the base is up to date against this lock and is skipped; the others rerun
        seed_locks(root, tree, locks)
        present = [rel for rel in outputs if (root / rel).exists()]
        for rel in present:
            _copy(root / rel, tree / rel)
        say(f"[review] {len(present)} of {len(outputs)} outputs of this workspace's run copied"
            + ("" if len(present) == len(outputs) else "; the stages of the missing ones rerun too (minutes)")
            + f"; reproducing {base} (Ctrl-C stops it)")
        progress = _Progress(base, say)
        log = _run([*DVC, "repro"], tree, f"reproducing {base} in a worktree", progress,
                   lambda pid: owner.write_text(f"{os.getpid()} {pid}\n"))
        counts = {"ran": log.count("Running stage '"), "skipped": log.count("didn't change, skipping")}
        return read_metrics(tree), counts
    except (KeyboardInterrupt, Stopped) as exc:
        why = "KeyboardInterrupt" if isinstance(exc, KeyboardInterrupt) else str(exc)
        raise PipelineError(f"--recompute-base: stopped ({why}); the base's worktree is removed, nothing was "
                            "written") from None
    finally:
        if previous:  # a second Ctrl-C must not cut the clean-up short (then the next review would do it)
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=root, capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)
            subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def summary(base: str, counts: dict[str, int]) -> str:
    return (f"[review] {base} recomputed on this machine: {counts['ran']} stages rerun, "
            f"{counts['skipped']} the same as this workspace's")

"""Drive real stage runs that a test can `kill -9` at chosen progress markers.

Why: "a killed run resumes to the same result" is only shown by killing a real
process mid-write, at points the test did not hand-pick (drawn from a seeded RNG
over the run's progress markers), and then checking what a downstream reader would
find. `Forker` wraps `stage_forker.py` (one import of the torch stack, a fork per run).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parents[2]
FORKER = Path(__file__).with_name("stage_forker.py")


class Forker:
    """A running `stage_forker.py`; `start` forks a run, `wait` reaps it, `close` ends the forker."""

    def __init__(self, preload: Sequence[str], cwd: Path):
        env = {**os.environ, "PIPELINE_QUIET": "1", "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false",
               "HF_HUB_OFFLINE": "1"}
        self.proc = subprocess.Popen([sys.executable, str(FORKER), *preload], cwd=cwd, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1)
        assert self._reply().get("ready"), "stage forker did not start"

    def _reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"stage forker exited (rc {self.proc.poll()})")
        return json.loads(line)

    def _send(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def start(self, call: str, args: list, log: Path) -> int:
        return self._send(op="start", call=call, args=args, log=str(log))["pid"]

    def wait(self, pid: int) -> int:
        return self._send(op="wait", pid=pid)["rc"]

    def run(self, call: str, args: list, log: Path) -> tuple[int, str]:
        """Run to the end; (exit code, the run's stdout+stderr)."""
        rc = self.wait(self.start(call, args, log))
        return rc, log.read_text()

    def run_until(self, call: str, args: list, log: Path, reached: Callable[[], bool],
                  timeout: float = 120.0, before_kill: Callable[[int], None] = lambda pid: None) -> int:
        """Start a run and SIGKILL it as soon as `reached()` is true; returns its exit code (-9 if killed).

        `before_kill(pid)` runs just before the signal (to note the run's own child processes)."""
        pid = self.start(call, args, log)
        deadline = time.monotonic() + timeout
        while not reached():
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                self.wait(pid)
                raise AssertionError(f"kill point not reached in {timeout}s; log:\n{log.read_text()[-2000:]}")
            if _ended(pid):  # a run that ended cannot be killed at its point: the caller sees its exit code
                return self.wait(pid)
            time.sleep(0.003)
        before_kill(pid)
        os.kill(pid, signal.SIGKILL)
        return self.wait(pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)


def _ended(pid: int) -> bool:
    """True once `pid` has exited (a zombie until the forker reaps it; Linux /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def spawned_children(pid: int) -> list[int]:
    """The multiprocessing-spawned children of `pid` (its shard workers), from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmdline:
            found.append(int(stat.parent.name))
    return found


def gone(pids: Sequence[int], wait: float = 10.0) -> bool:
    """True once every pid has exited (zombies count as exited), waiting up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while any(not _ended(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kill_points(seed: int, markers: int, n: int = 3) -> list[int]:
    """`n` increasing kill points in 1..markers, one drawn from each of `n` equal slices of the range.

    One per slice, so the points are spread over the run (early, middle, late) while
    their exact place is the RNG's, not the test author's."""
    rng = random.Random(seed)
    edges = [1 + round(i * markers / n) for i in range(n + 1)]
    return [rng.randrange(lo, max(lo + 1, hi)) for lo, hi in zip(edges, edges[1:])]


def jsonl_lines(paths: Sequence[Path]) -> int:
    """Complete lines (newline-terminated) in the files that exist."""
    total = 0
    for p in paths:
        try:
            total += p.read_bytes().count(b"\n")
        except FileNotFoundError:
            pass
    return total


def complete_lines(path: Path) -> list[dict]:
    """The newline-terminated records of a log; a torn last line (a kill mid-write) is left out."""
    data = path.read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines() if line.strip()]

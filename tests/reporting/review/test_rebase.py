"""`make review RECOMPUTE=1` (reporting/review/rebase.py): what it reads from dvc.lock, its bad input, and how a
person follows and stops it (progress lines, Ctrl-C within a second, no worktree left on any way out).

The whole flow (a worktree of the base reproduced from this workspace's run) runs in the end-to-end
test after the README's experiment: tests/pipeline/test_end_to_end.py. Here a two-commit repository whose
one stage sleeps as long as the case needs stands in for the pipeline.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.review import rebase

ROOT = Path(__file__).resolve().parents[3]

LOCK = """schema: '2.0'
stages:
  items:
    cmd: python -m stages.items
    deps:
    - path: stages/items.py
      hash: md5
      md5: 0123
    outs:
    - path: data/items/items.parquet
      hash: md5
      md5: 4567
    - path: metrics/items.json
      hash: md5
      md5: 89ab
  curate@curated:
    cmd: python -m stages.curate curated
    outs:
    - path: data/curate/curated
      hash: md5
      md5: cdef.dir
    - path: metrics/items.json
      hash: md5
      md5: 89ab
"""


def test_outputs_are_every_stage_out_once(tmp_path: Path) -> None:
    lock = tmp_path / "dvc.lock"
    lock.write_text(LOCK)
    assert rebase._outputs(lock) == ["data/curate/curated", "data/items/items.parquet", "metrics/items.json"]


@pytest.mark.parametrize("text", ["schema: '2.0'\n", "[]\n", "stages: 3\n"])
def test_a_lock_without_stages_is_one_line_naming_it(tmp_path: Path, text: str) -> None:
    lock = tmp_path / "dvc.lock"
    lock.write_text(text)
    with pytest.raises(PipelineError, match=r"dvc.lock: no stages recorded; run the pipeline"):
        rebase._outputs(lock)


def test_no_lock_is_one_line_before_any_worktree(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match=r"^dvc.lock: missing; run the pipeline"):
        rebase.recompute("HEAD", lambda p: {}, tmp_path)
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------- a review a person can follow and stop (#53)

STAGE = r"""
import json, os, time, yaml
p = yaml.safe_load(open("params.yaml"))
time.sleep(p["sleep"])
os.makedirs("metrics", exist_ok=True)
json.dump({"x": p["x"] * 2}, open("metrics/m.json", "w"))
"""


def _env() -> dict:
    """git and DVC as a person runs them here: a committer, no analytics, this venv's python first."""
    return {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t", "DVC_NO_ANALYTICS": "1", "PYTHONPATH": str(ROOT),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _git_dvc_repo(root: Path, base_sleep: float) -> dict:
    """A repository whose base commit (tag `base`) sleeps `base_sleep` s in its one stage, and a workspace
    (HEAD) that changed the params and ran the stage: recomputing the base reruns it."""
    env = _env()

    def run(*cmd: str) -> None:
        subprocess.run(list(cmd), cwd=root, env=env, capture_output=True, text=True, check=True)

    root.mkdir(parents=True, exist_ok=True)
    run("git", "init", "-q")
    run(sys.executable, "-m", "dvc", "init", "-q")
    (root / "stage.py").write_text(STAGE)
    (root / "dvc.yaml").write_text(f"stages:\n  s:\n    cmd: {sys.executable} stage.py\n    deps: [stage.py]\n"
                                   "    params: [x, sleep]\n    metrics: [metrics/m.json: {cache: false}]\n")
    (root / "params.yaml").write_text(f"x: 1\nsleep: {base_sleep}\n")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "base")
    run("git", "tag", "base")
    (root / "params.yaml").write_text("x: 2\nsleep: 0\n")
    run(sys.executable, "-m", "dvc", "repro", "-q")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "the change under review")
    return env


def _review(root: Path, env: dict) -> subprocess.Popen:
    """`make review BASE=base RECOMPUTE=1` as a terminal runs it: in a process group of its own (the terminal's
    foreground group, which Ctrl-C signals as a whole)."""
    return subprocess.Popen([sys.executable, "-m", "decision_pipeline", "review", "--base", "base", "--recompute-base",
                             "--no-plots", "--out", "review"], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_as_a_terminal)


def _as_a_terminal() -> None:
    """Ctrl-C at its default disposition, as a shell's foreground job has it. An ignored SIGINT is inherited
    through exec and Python then installs no KeyboardInterrupt handler; in the full suite the test worker had
    come to ignore it (measured: under a parent that ignores SIGINT this test hangs 60 s), which a terminal
    never does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(proc: subprocess.Popen, words: str, timeout: float = 120.0) -> list[str]:
    """stderr lines until one holds `words`."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if words in line:
            return seen
    raise AssertionError(f"never saw {words!r}: {seen}")


def _leftovers(root: Path, trees: list[str] | None = None) -> tuple[list[str], list[int]]:
    """(worktrees registered besides the checkout, live processes working inside one of them or of `trees`)."""
    listed = [line[9:] for line in subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=root,
                                                   capture_output=True, text=True).stdout.splitlines()
              if line.startswith("worktree ") and Path(line[9:]) != root]
    watch = listed + list(trees or [])
    procs = []
    for pid in os.listdir("/proc"):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if any(cwd.startswith(t) for t in watch):
            procs.append(int(pid))
    return listed, procs


def test_the_base_rerun_shows_progress_and_leaves_no_worktree(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    env = _git_dvc_repo(root, base_sleep=0)
    proc = _review(root, env)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    lines = err.splitlines()
    assert any(line.startswith("[review] checking base out in ") for line in lines), lines
    assert "[review] base: stage 's' reruns (#1; 0 unchanged so far;" in err, lines
    assert "[review] base recomputed on this machine: 1 stages rerun, 0 the same as this workspace's" in err
    assert _leftovers(root) == ([], [])
    assert (root / "review" / "review.md").read_text() in out  # the review itself, printed and written


def test_ctrl_c_stops_the_base_rerun_within_a_second_and_removes_the_worktree(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    env = _git_dvc_repo(root, base_sleep=120)
    proc = _review(root, env)
    _wait_for(proc, "stage 's' reruns")
    trees, working = _leftovers(root)
    assert len(trees) == 1 and working, "the base's stage should be running in its worktree now"
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
    rest = proc.communicate(timeout=60)[1]
    took = time.monotonic() - started
    assert proc.returncode == 2 and took < 1.5, (took, rest)
    assert rest.strip().splitlines() == ["error: --recompute-base: stopped (KeyboardInterrupt); the base's worktree "
                                         "is removed, nothing was written"], rest
    assert _leftovers(root, trees) == ([], []) and not Path(trees[0]).parent.exists()
    assert not (root / "review").exists()


def test_a_review_killed_outright_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    """kill -9 mid-rerun: the worktree stays registered and its stage keeps running; the next review removes
    both before it starts (and a second review running now would keep its own)."""
    root = tmp_path / "repo"
    env = _git_dvc_repo(root, base_sleep=120)
    proc = _review(root, env)
    _wait_for(proc, "stage 's' reruns")
    proc.kill()
    proc.communicate(timeout=30)
    trees, working = _leftovers(root)
    assert len(trees) == 1 and working, "kill -9 should have left the worktree and its stage behind"
    said: list[str] = []
    removed = rebase.remove_stale(root, said.append)
    assert [str(t) for t in removed] == trees and said == [
        f"[review] removed the base worktree a stopped review left behind: {trees[0]}"]
    time.sleep(0.2)
    assert _leftovers(root, trees) == ([], []) and not Path(trees[0]).parent.exists()


def test_a_live_reviews_worktree_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    env = _git_dvc_repo(root, base_sleep=120)
    proc = _review(root, env)
    try:
        _wait_for(proc, "stage 's' reruns")
        assert rebase.remove_stale(root, lambda line: None) == []
        assert len(_leftovers(root)[0]) == 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 2 and _leftovers(root) == ([], [])


# ---------------------------------------------------------------- a base from before the pipeline was split (#52)

def test_a_base_without_the_parts_gets_their_lock_entries_in_its_root_lock(tmp_path: Path) -> None:
    """The base declares stage `b` in its one dvc.yaml; this workspace moved `b` into pipelines/p/dvc.yaml (the
    root's `a` reads its output, as the pipeline's root reads the parts'). DVC then skips `b` in the base's
    worktree (same cmd, deps and outs) instead of rerunning a whole part."""
    env = _env()
    root = tmp_path / "repo"
    root.mkdir()

    def run(*cmd: str) -> str:
        return subprocess.run(list(cmd), cwd=root, env=env, capture_output=True, text=True, check=True).stdout

    stage_b = "cmd: python -c \"open('b.txt','w').write('b')\"\n    outs: [b.txt]\n"
    run("git", "init", "-q")
    run(sys.executable, "-m", "dvc", "init", "-q")
    (root / "dvc.yaml").write_text("stages:\n  a:\n    cmd: python -c \"open('a.txt','w').write(open('b.txt').read())\"\n"
                                   "    deps: [b.txt]\n    outs: [a.txt]\n  b:\n    " + stage_b)
    run("git", "add", "-A")
    run("git", "commit", "-qm", "base: one dvc.yaml")
    run("git", "tag", "base")
    (root / "dvc.yaml").write_text("stages:\n  a:\n    cmd: python -c \"open('a.txt','w').write(open('b.txt').read())\"\n"
                                   "    deps: [b.txt]\n    outs: [a.txt]\n")
    (root / "pipelines" / "p").mkdir(parents=True)
    (root / "pipelines" / "p" / "dvc.yaml").write_text("stages:\n  b:\n    wdir: ../..\n    " + stage_b)
    run(sys.executable, "-m", "dvc", "repro", "-q")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "b in a part of its own")
    assert (root / "pipelines" / "p" / "dvc.lock").is_file() and "b:" not in (root / "dvc.lock").read_text()

    tree = tmp_path / "base"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tree), "base"], cwd=root, env=env, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "cache", "dir", "--local", str(rebase.cache_dir(root))], cwd=tree,
                   env=env, check=True)   # as recompute() shares this checkout's cache
    rebase.seed_locks(root, tree, [root / "pipelines" / "p" / "dvc.lock", root / "dvc.lock"])
    assert not (tree / "pipelines").exists()
    for name in ("a.txt", "b.txt"):
        (tree / name).write_text("b")
    out = subprocess.run([sys.executable, "-m", "dvc", "status", "--json"], cwd=tree, env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() in ("", "{}"), out   # both stages up to date in the base: nothing reruns

"""Tests for decision_pipeline.common.progress: the progress line's cadence and text, the heartbeat,
the terminal modes, and the DVCLive files (expected steps and keys, NaN, a killed run's leftovers)."""
from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.log import PROGRESS_SECONDS, progress_mode, progress_seconds
from decision_pipeline.common.progress import LiveMetrics, TrainingProgress, clock_text


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lines_progress(clock: FakeClock, every: float = 10.0, **kw) -> tuple[TrainingProgress, io.StringIO]:
    out = io.StringIO()
    return TrainingProgress("sft", mode="lines", every=every, stream=out, clock=clock, heartbeat=False, **kw), out


def strict_json(path: Path) -> dict:
    """json.loads that refuses NaN/Infinity, as strict readers (and the JSON spec) do."""
    def refuse(name: str):
        raise ValueError(f"{path}: {name} is not JSON")
    return json.loads(path.read_text(), parse_constant=refuse)


def tsv_rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text().splitlines()]


# ------------------------------------------------------------------ the terminal line
def test_lines_come_every_n_seconds_with_rate_and_eta():
    clock = FakeClock()
    progress, out = lines_progress(clock)
    progress.begin(0, 20, tokens=0)
    for step in range(1, 21):
        clock.now += 3.0  # a step takes 3 s: a line when 10 s have passed since the last one, and at the end
        progress.step(step, {"loss": 1 / step, "other": 7}, tokens=step * 100)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[sft] 20 steps; a progress line every 10s"
    assert [line.split(" | ")[0] for line in lines[1:]] == [
        "[sft] step 4/20 (20%)", "[sft] step 8/20 (40%)", "[sft] step 12/20 (60%)", "[sft] step 16/20 (80%)",
        "[sft] step 20/20 (100%)"]
    # step 4 at 12 s: 400 tokens / 12 s = 33 tok/s; 16 steps left at 3 s each = 48 s; only the shown key
    assert lines[1] == "[sft] step 4/20 (20%) | loss 0.25 | 33 tok/s | 0:12 elapsed, ETA 0:48"
    assert lines[-1] == "[sft] step 20/20 (100%) | loss 0.05 | 33 tok/s | 1:00 elapsed, ETA 0:00"


def test_a_resumed_run_counts_rate_and_eta_from_its_own_start():
    clock = FakeClock()
    progress, out = lines_progress(clock, desc="sft curated")
    progress.begin(50, 100, tokens=5000)
    clock.now = 10.0
    progress.step(60, {"loss": 2.0}, tokens=6000)
    head, *_ = out.getvalue().splitlines()
    assert head == "[sft] curated: 100 steps, resuming after step 50; a progress line every 10s"
    assert out.getvalue().splitlines()[1] == ("[sft] curated: step 60/100 (60%) | loss 2 | 100 tok/s | "
                                              "0:10 elapsed, ETA 0:40")


def test_heartbeat_line_while_one_step_runs_long():
    clock = FakeClock()
    progress, out = lines_progress(clock)
    progress.begin(0, 5)
    progress.step(1, {"loss": 1.5})
    clock.now = 9.0
    progress.tick()  # under 10 s since the last line: nothing
    clock.now = 25.0
    progress.tick()
    last = out.getvalue().splitlines()[-1]
    assert last == "[sft] step 1/5 (20%) | loss 1.5 | 0:25 elapsed, ETA 1:40 | step 2 running for 0:25"
    assert len(out.getvalue().splitlines()) == 2


def test_heartbeat_thread_prints_without_steps():
    """The real thread: a step that never ends still gets a line at about every `every` seconds."""
    out = io.StringIO()
    progress = TrainingProgress("rl", mode="lines", every=0.1, stream=out)
    progress.begin(0, 3)
    time.sleep(0.45)
    progress.close()
    running = [line for line in out.getvalue().splitlines() if "step 1 running for" in line]
    assert 2 <= len(running) <= 5


def test_default_cadence_meets_the_30_second_promise():
    """Issue #36: on a terminal or in a log, SFT shows progress at least every 30 s; the heartbeat wakes
    every quarter period, so lines are at most 1.25 x PROGRESS_SECONDS apart."""
    assert PROGRESS_SECONDS * 1.25 <= 30


def test_bar_mode_draws_a_tqdm_bar_with_the_values():
    out = io.StringIO()
    clock = FakeClock()
    progress = TrainingProgress("pretrain", "pretrain curated", mode="bar", stream=out, clock=clock, heartbeat=False)
    progress.begin(0, 4, tokens=0)
    for step in range(1, 5):
        clock.now += 1.0
        progress.step(step, {"loss": 3.25}, tokens=step * 2048)
    progress.tick()  # the heartbeat redraws (tqdm skips redraws less than 0.1 s of real time apart)
    progress.close()
    text = out.getvalue()
    assert "pretrain curated" in text and "4/4" in text and "loss 3.25" in text and "2.0k tok/s" in text


def test_mode_follows_the_environment(monkeypatch, capsys):
    monkeypatch.delenv("PIPELINE_PROGRESS", raising=False)
    monkeypatch.setenv("PIPELINE_QUIET", "1")
    assert progress_mode() == "off"
    quiet = TrainingProgress("sft", heartbeat=False)
    quiet.begin(0, 2)
    quiet.step(2, {"loss": 1.0})
    assert capsys.readouterr().err == ""
    monkeypatch.delenv("PIPELINE_QUIET")
    assert progress_mode() == "lines"  # pytest's captured stderr is no terminal
    monkeypatch.setenv("PIPELINE_PROGRESS", "1")
    assert progress_mode() == "bar"
    assert TrainingProgress("sft", enabled=False).mode == "off"  # a non-main process


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "inf"])
def test_bad_cadence_is_one_line(monkeypatch, raw):
    monkeypatch.setenv("PIPELINE_PROGRESS_SECONDS", raw)
    with pytest.raises(PipelineError, match=r"PIPELINE_PROGRESS_SECONDS=.*expected a number of seconds > 0") as e:
        progress_seconds()
    assert "\n" not in str(e.value)
    monkeypatch.setenv("PIPELINE_PROGRESS_SECONDS", "5")
    assert progress_seconds() == 5.0


def test_clock_text():
    assert [clock_text(s) for s in (0, 59.6, 61, 3599, 3600, 3725)] == ["0:00", "1:00", "1:01", "59:59", "1:00:00",
                                                                      "1:02:05"]


# ------------------------------------------------------------------ the DVCLive files
def test_live_files_hold_every_step_and_key(tmp_path):
    clock = FakeClock()
    live = LiveMetrics(tmp_path / "live")
    progress, _ = lines_progress(clock, live=live)
    progress.begin(0, 3)
    for step in (1, 2, 3):
        progress.step(step, {"loss": 1.0 / step, "rewards/correct/mean": 0.5 * step, "note": "text"})
    root = tmp_path / "live"
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == [
        "metrics.json", "plots/metrics/train/loss.tsv", "plots/metrics/train/rewards/correct/mean.tsv"]
    assert tsv_rows(root / "plots/metrics/train/loss.tsv") == [["step", "loss"], ["1", "1.0"], ["2", "0.5"],
                                                               ["3", repr(1 / 3)]]
    assert strict_json(root / "metrics.json") == {"train": {"loss": 1 / 3, "rewards": {"correct": {"mean": 1.5}}},
                                                  "step": 3}


def test_nan_is_one_line_naming_file_and_key_and_never_written(tmp_path, capsys):
    live = LiveMetrics(tmp_path / "live")
    live.log(1, {"train/loss": 2.0})
    live.log(2, {"train/loss": float("nan"), "train/lr": 0.1})
    live.log(3, {"train/loss": float("inf")})
    err = capsys.readouterr().err.splitlines()
    tsv = tmp_path / "live" / "plots" / "metrics" / "train" / "loss.tsv"
    assert err == [f"warning: {tsv}: train/loss is nan at step 2; left out of the curve and of metrics.json "
                   "(later non-finite values of this key too)"]
    assert tsv_rows(tsv) == [["step", "loss"], ["1", "2.0"]]
    assert strict_json(tmp_path / "live" / "metrics.json") == {"train": {"loss": 2.0, "lr": 0.1}, "step": 3}


def test_a_killed_runs_directory_is_rebuilt_not_read(tmp_path):
    """What a kill leaves (a torn metrics.json, steps past the checkpoint, a NaN row) is not read: the
    resumed run replays the checkpoint's record and ends with the uninterrupted run's bytes."""
    record = [(s, {"loss": 1.0 / s, "lr": 0.01}) for s in range(1, 7)]

    def run(directory: Path, killed_after: int | None = None) -> None:
        progress, _ = lines_progress(FakeClock(), live=LiveMetrics(directory))
        done = record[:killed_after] if killed_after else []
        progress.replay(done)
        progress.begin(len(done), 6)
        for step, values in record[len(done):]:
            progress.step(step, values)

    run(tmp_path / "straight")
    left = tmp_path / "resumed"
    (left / "plots" / "metrics" / "train").mkdir(parents=True)
    (left / "metrics.json").write_text('{"train": {"loss": 0.2')  # torn mid-write
    (left / "plots" / "metrics" / "train" / "loss.tsv").write_text("step\tloss\n1\t1.0\n2\tnan\n5\t0.2\n5\t0.2\n")
    (left / "report.html").write_text("<html>")
    run(left, killed_after=3)
    files = sorted(p.relative_to(tmp_path / "straight") for p in (tmp_path / "straight").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(left) for p in left.rglob("*") if p.is_file())
    for rel in files:
        assert (left / rel).read_bytes() == (tmp_path / "straight" / rel).read_bytes(), rel


def test_a_directory_with_foreign_files_is_refused_in_one_line(tmp_path):
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "loss.png").write_bytes(b"png")
    with pytest.raises(PipelineError, match=r"holds 'loss.png', which DVCLive does not write"):
        LiveMetrics(tmp_path / "plots")
    assert (tmp_path / "plots" / "loss.png").exists()  # nothing deleted
    (tmp_path / "file").write_text("x")
    with pytest.raises(PipelineError, match="exists and is not a directory"):
        LiveMetrics(tmp_path / "file")


def test_live_files_need_no_dvc_repository(tmp_path, monkeypatch):
    """DVCLive writes the files only: in a git repository without `.dvc` nothing is initialised."""
    import subprocess
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    LiveMetrics("live").log(1, {"train/loss": 1.0})
    assert not (tmp_path / ".dvc").exists() and (tmp_path / "live" / "metrics.json").is_file()


def test_the_summary_keeps_the_followed_keys_and_the_curves_keep_all(tmp_path):
    """`dvc exp show` gets a column per summary key: `open` keeps the shown ones; the tsv files keep every key."""
    progress = TrainingProgress.open("rl", tmp_path / "live", shown=("reward", "loss"), mode="off")
    progress.begin(0, 2)
    progress.step(1, {"loss": 0.5, "reward": 0.25, "grad_norm": 3.0, "rewards/format/mean": 1.0})
    progress.step(2, {"loss": 0.4, "grad_norm": 2.0})
    assert strict_json(tmp_path / "live" / "metrics.json") == {"train": {"loss": 0.4, "reward": 0.25}, "step": 2}
    assert tsv_rows(tmp_path / "live/plots/metrics/train/grad_norm.tsv") == [["step", "grad_norm"], ["1", "3.0"],
                                                                           ["2", "2.0"]]
    assert (tmp_path / "live/plots/metrics/train/rewards/format/mean.tsv").is_file()
    pretrain = LiveMetrics(tmp_path / "pre", summary=("train/seed-*/loss",))
    pretrain.log(3, {"train/seed-0/loss": 2.0, "train/seed-0/lr": 0.1})
    pretrain.log(1, {"train/seed-1/loss": 2.5, "train/seed-1/lr": 0.2})
    assert strict_json(tmp_path / "pre" / "metrics.json") == {
        "train": {"seed-0": {"loss": 2.0}, "seed-1": {"loss": 2.5}}, "step": 1}

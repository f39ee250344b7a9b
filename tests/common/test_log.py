"""Tests for decision_pipeline.common.log: the error contract of stage entry points and the summary line."""
from __future__ import annotations

import sys

import pytest

from decision_pipeline.common import log
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.log import bars_enabled, info, progress, stage_main, summary


# ------------------------------------------------------------------ stage_main
def test_stage_main_pipeline_error_is_one_stderr_line_and_code_2(capsys):
    @stage_main
    def main(argv):
        raise PipelineError("params.yaml: train.steps: expected an integer, got '10'")

    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "error: params.yaml: train.steps: expected an integer, got '10'\n"


@pytest.mark.parametrize("argv, named", [
    (["--params", "/tmp/exp/other.yaml", "--out", "x"], "/tmp/exp/other.yaml"),
    (["--params=other.yaml"], "other.yaml"),
    (["--params", "params.yaml"], "params.yaml"),
    (["--out", "x"], "params.yaml"),
])
def test_stage_main_names_the_params_file_the_stage_read(argv, named, capsys):
    """A check far from the loader says `params.yaml: ...`; run with --params other.yaml, the line names that file."""
    @stage_main
    def main(argv):
        raise PipelineError("params.yaml: items.splits needs keys pool, rl with fractions summing to 1")

    assert main(argv) == 2
    assert capsys.readouterr().err == f"error: {named}: items.splits needs keys pool, rl with fractions summing to 1\n"


def test_a_real_stage_names_its_params_file(tmp_path, capsys):
    """stages.items with a params file whose splits do not sum to 1 (checked in ItemsParams, not by the loader)."""
    from decision_pipeline.common.profiles import dump, merged_profile
    from pathlib import Path
    import stages.items as items
    params = merged_profile("micro", Path(__file__).resolve().parents[2])
    params["items"]["splits"]["pool"] += 0.5
    path = tmp_path / "variant.yaml"
    path.write_text(dump(params))
    rc = items.main(["--params", str(path), "--out", str(tmp_path / "i.parquet"), "--metrics", str(tmp_path / "m.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: {path}: items.splits"), err
    assert not (tmp_path / "i.parquet").exists()


def test_stage_main_normal_return_is_0_and_passes_argv(capsys):
    seen = []

    @stage_main
    def main(argv):
        seen.append(argv)
        print("working")

    assert main(["--params", "p.yaml"]) == 0
    assert main() == 0
    assert seen == [["--params", "p.yaml"], None]
    out, err = capsys.readouterr()
    assert out == "working\nworking\n"
    assert "error" not in err


def test_stage_main_lets_other_exceptions_through(capsys):
    @stage_main
    def main(argv):
        raise ValueError("a programming bug keeps its traceback")

    with pytest.raises(ValueError, match="programming bug"):
        main([])
    assert "error:" not in capsys.readouterr().err


def test_stage_main_keeps_function_metadata():
    def main(argv):
        """Doc of the stage."""

    wrapped = stage_main(main)
    assert wrapped.__name__ == "main"
    assert wrapped.__doc__ == "Doc of the stage."
    assert stage_main(ray_exit=True)(main).__name__ == "main"


class _Exited(Exception):
    pass


@pytest.mark.parametrize("ray_exit, joins, fails, expected", [
    (True, 1, False, "os._exit(0)"),   # a run that drove Ray ends the process once main returns
    (True, 0, False, 0),               # engine local: no Ray, a normal return
    (False, 1, False, 0),              # the option off
    (True, 1, True, 2),                # a failure is the one error line and code 2, as always
])
def test_stage_main_ray_exit_ends_a_run_that_attached_to_ray(monkeypatch, capsys, ray_exit, joins, fails, expected):
    """The guard the Ray stages share: after a run that attached to a cluster (raycluster.connect counts
    it), `os._exit(0)`, since a Ray driver can hang in interpreter shutdown; only that run, not one after it."""
    from decision_pipeline.common import raycluster

    def fake_exit(code):
        raise _Exited(f"os._exit({code})")

    monkeypatch.setattr(log.os, "_exit", fake_exit)
    monkeypatch.setattr(raycluster, "_joins", 5)  # attached in an earlier run of this process

    @stage_main(ray_exit=ray_exit)
    def main(argv):
        monkeypatch.setattr(raycluster, "_joins", raycluster.joins() + joins)
        if fails:
            raise PipelineError("generate.ray.address: no Ray cluster answers at 127.0.0.1:9")

    try:
        got = main([])
    except _Exited as exc:
        got = str(exc)
    assert got == expected
    assert ("error:" in capsys.readouterr().err) == fails


# ------------------------------------------------------------------ summary / info
def test_summary_format(capsys, monkeypatch):
    monkeypatch.setattr(log.time, "time", lambda: 1012.34)
    summary("train", 1000.0, items=120, acc=0.8123456, name="run-a", loss=1234567.0)
    out, err = capsys.readouterr()
    assert out == "[train] done in 12.3s: items=120 acc=0.8123 name=run-a loss=1.235e+06\n"
    assert err == ""


def test_summary_elapsed_is_measured_from_started(capsys):
    import time

    summary("s", time.time() - 2.0, k=1)
    line = capsys.readouterr().out
    assert line.startswith("[s] done in 2.")
    assert line.endswith("s: k=1\n")


def test_info_goes_to_stderr(capsys):
    info("curate", "kept 10 of 12")
    out, err = capsys.readouterr()
    assert (out, err) == ("", "[curate] kept 10 of 12\n")


# ------------------------------------------------------------------ progress
def test_progress_disabled_when_quiet(capsys, monkeypatch):
    monkeypatch.setenv("PIPELINE_QUIET", "1")
    bar = progress(range(5), desc="generating", total=5)
    assert bar.disable is True
    assert list(bar) == [0, 1, 2, 3, 4]
    assert capsys.readouterr().err == ""


def test_progress_enabled_when_forced(capsys, monkeypatch):
    monkeypatch.delenv("PIPELINE_QUIET", raising=False)
    monkeypatch.setenv("PIPELINE_PROGRESS", "1")
    bar = progress(["a", "b"], desc="generating", unit="item")
    assert bar.disable is False
    assert list(bar) == ["a", "b"]
    assert "generating" in capsys.readouterr().err


def test_progress_off_in_a_log_file(capsys, monkeypatch):
    # capsys's stderr is not a terminal, like `dvc repro > log` or CI
    monkeypatch.delenv("PIPELINE_QUIET", raising=False)
    monkeypatch.delenv("PIPELINE_PROGRESS", raising=False)
    bar = progress(["a", "b"], desc="generating", unit="item")
    assert bar.disable is True and list(bar) == ["a", "b"]
    assert capsys.readouterr().err == ""


def test_progress_on_a_terminal(monkeypatch):
    monkeypatch.delenv("PIPELINE_QUIET", raising=False)
    monkeypatch.delenv("PIPELINE_PROGRESS", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert bars_enabled() is True

"""`make gpu-check`'s CPU variant (TINY=1), the one CI runs: the real stage chain and the smoke at tiny
shapes, one table; and its bad inputs, each one line with exit 2 and nothing written under data/ or models/."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CMD = [sys.executable, "-m", "decision_pipeline", "gpu-check"]
STAGES = ["items", "base_model", "generate", "select_chains", "sft", "calibrate", "evaluate", "rl", "s1mb_data",
          "s1mb"]


def _newer_than(start: float) -> list[str]:
    """Files under data/ and models/ modified since `start` (this test's run must add none)."""
    out = []
    for top in ("data", "models"):
        base = ROOT / top
        if base.is_dir():
            out += [str(p) for p in base.rglob("*") if p.is_file() and p.stat().st_mtime >= start]
    return out


def test_make_target_runs_the_module():
    text = (ROOT / "Makefile").read_text()
    assert re.search(r"^gpu-check: \$\(STAMP\)\n\t\$\(PY\) -m decision_pipeline gpu-check "
                     r"\$\(if \$\(TINY\),--tiny\)", text, re.M)
    assert "gpu-check" in next(line for line in text.splitlines() if line.startswith(".PHONY"))


@pytest.mark.slow
def test_cpu_variant_runs_stages_then_smoke(tmp_path):
    start = time.time()
    run = subprocess.run([*CMD, "--tiny", "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    stages = json.loads((tmp_path / "stages.json").read_text())["rows"]
    assert [r["stage"] for r in stages] == STAGES and all(r["rc"] == 0 and r["device"] == "cpu" for r in stages)
    smoke = json.loads((tmp_path / "smoke.json").read_text())["rows"]
    assert [r["stage"] for r in smoke] == ["readout", "post-chain readout", "sft", "grpo"]
    table = (tmp_path / "table.txt").read_text().splitlines()
    assert table[0].split() == ["stage", "device", "seconds", "peak", "GiB", "plan", "GiB"]
    assert [line.split()[0] for line in table[1:11]] == STAGES and len(table) == 1 + 10 + 4
    assert table[-1].startswith("smoke grpo 2x(32+64)") and table[-1].split()[-1] != "-"   # the plan's figure
    assert table == run.stdout.splitlines()[-len(table) - 1:-1]       # the same table printed
    assert _newer_than(start) == []


def _main(argv: list[str], capsys, monkeypatch) -> subprocess.CompletedProcess:
    """The CLI's `main(argv)` in this process (what `python -m` runs), exit code and output captured: a refusal
    needs no fresh interpreter importing torch; the CPU variant above runs the real entry point."""
    from decision_pipeline.preflight.gpu_check import main
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    rc = main(argv)
    out = capsys.readouterr()
    return subprocess.CompletedProcess([*CMD, *argv], rc, out.out, out.err)


def test_cpu_only_torch_refuses_in_one_line(tmp_path, capsys, monkeypatch):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the refusal cannot be shown")
    run = _main(["--out", str(tmp_path / "out")], capsys, monkeypatch)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1
    assert "sees no GPU" in lines[0] and "make gpu-install" in lines[0] and "TINY=1" in lines[0]
    assert not (tmp_path / "out").exists()


def test_config_missing_vocab_size_refuses_in_one_line(tmp_path, capsys, monkeypatch):
    start = time.time()
    config = json.loads((ROOT / "tests/fixtures/smollm2_135m/config.json").read_text())
    del config["vocab_size"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    run = _main(["--tiny", "--stage-config", str(tmp_path / "config.json"), "--out", str(tmp_path / "out")],
                capsys, monkeypatch)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert "key vocab_size missing" in lines[0] and "published config.json" in lines[0]
    assert not (tmp_path / "out").exists() and _newer_than(start) == []

"""`make gpu-check`: the real stages on CUDA with a random-weight model, then the device smoke, one table.

Why: a new GPU machine should say in about a minute whether the pipeline runs there and whether the
memory plan holds, before hours of work. Phases, each a child process with its own time limit (a
hung phase cannot take the others with it) that writes its rows as soon as they are measured:
- stages: `python -m decision_pipeline stage-chain` (SmolLM2-135M's shapes, the whole stage chain);
- smoke:  `python -m decision_pipeline smoke` (Qwen3-4B's shapes, readout and the real SFT/GRPO
  trainers' steps beside the plan);
- decode (`--measure`): `python -m decision_pipeline decode-bench` (hf decode ms per step per mode).
`--measure` is the one-shot device measurement (scripts/gpu_measure.sh): the measured table's held-out rows
(configurations the plan was not fitted on), decode speeds, most valuable first (smoke, decode, stages). `--tiny` is the CPU variant CI runs. The table
(stage, device, seconds, peak GiB, plan GiB) and every phase's JSON go to `--out`; nothing is written
under data/ or models/.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.preflight.model_dirs import QWEN3_4B, SMOLLM2_135M, read_config

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = {"stages": 240, "smoke": 300, "decode": 300}            # make gpu-check
MEASURE_TIMEOUT_S = {"smoke": 240, "decode": 120, "stages": 80}     # scripts/gpu_measure.sh: ~7 minutes in all


def phase_command(phase: str, out: Path, tiny: bool, measure: bool, stage_config: Path, smoke_config: Path,
                  timeout_s: int) -> list[str]:
    """The child process of one phase."""
    py = [sys.executable, "-m", "decision_pipeline"]
    flag = ["--tiny"] if tiny else []
    if phase == "stages":
        return [*py, "stage-chain", *flag, "--model-config", str(stage_config),
                "--json", str(out / "stages.json")]
    if phase == "smoke":
        return [*py, "smoke", *flag, "--model-config", str(smoke_config),
                "--shapes", "heldout" if measure and not tiny else "profile", "--json", str(out / "smoke.json")]
    if phase == "decode":
        extra = ["--batches", "1,4", "--prompt", "64", "--steps", "8"] if tiny else []
        return [*py, "decode-bench", *flag, *extra, "--deadline-s", str(timeout_s - 20),
                "--json", str(out / "decode.json")]
    raise PipelineError(f"gpu-check: phase {phase!r} is unknown; use stages, smoke, decode")


def _read_rows(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return []


def table_rows(out: Path) -> list[tuple[str, str, str, str, str]]:
    """(stage, device, seconds, peak GiB, plan GiB) from every phase's JSON in `out`."""
    rows = []
    gib = lambda v: "-" if v is None else f"{v:.2f}"   # noqa: E731
    for r in _read_rows(out / "stages.json"):
        rows.append((r["stage"] + ("" if r["rc"] == 0 else f" (exit {r['rc']})"), r["device"], f"{r['seconds']:.1f}",
                     gib(r["peak_gib"]), "-"))
    for r in _read_rows(out / "smoke.json"):
        d = r["detail"]
        shape = (f"{d['rows']}x{d['length']}" if r["stage"] == "sft" else
                 f"{d['micro']}x({d['prompt']}+{d['completion']}) {d['loss_type']} {d['logprob_path']}"
                 if r["stage"] == "grpo" else f"{d['rows']}x{d['prefix_tokens']}")
        rows.append((f"smoke {r['stage']} {shape}", r["device"], f"{r['seconds']:.1f}", gib(r["peak_gib"]),
                     gib(r["plan_gib"])))
    for r in _read_rows(out / "decode.json"):
        label = f"decode {r['decode']} batch {r['batch']}"
        if "ms_per_step" in r:
            rows.append((f"{label}: {r['ms_per_step']} ms/step", "", f"{r['warmup_s']:.1f}", gib(r["peak_gib"]), "-"))
        else:
            rows.append((f"{label}: {r.get('skipped') or r.get('error', '')[:80]}", "", "-", "-", "-"))
    return rows


def render(rows: list[tuple[str, str, str, str, str]]) -> str:
    head = ("stage", "device", "seconds", "peak GiB", "plan GiB")
    width = max([len(head[0])] + [len(r[0]) for r in rows])
    lines = [f"{head[0]:<{width}}  {head[1]:<6} {head[2]:>8} {head[3]:>9} {head[4]:>9}"]
    lines += [f"{r[0]:<{width}}  {r[1]:<6} {r[2]:>8} {r[3]:>9} {r[4]:>9}" for r in rows]
    return "\n".join(lines)


def run_phases(phases: list[str], out: Path, tiny: bool, measure: bool, stage_config: Path,
               smoke_config: Path) -> dict[str, int]:
    """Each phase in order within its time limit; the table is rewritten after each. Exit codes by phase
    (124 = its time limit)."""
    limits = MEASURE_TIMEOUT_S if measure else TIMEOUT_S
    codes: dict[str, int] = {}
    env = {**os.environ, "PIPELINE_QUIET": os.environ.get("PIPELINE_QUIET", "1"), "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    for phase in phases:
        limit = limits[phase]
        cmd = phase_command(phase, out, tiny, measure, stage_config, smoke_config, limit)
        start = time.monotonic()
        print(f"gpu-check: {phase} (limit {limit} s): {' '.join(cmd[2:])}", flush=True)
        with open(out / "log.txt", "a") as log:
            try:
                codes[phase] = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                              timeout=limit).returncode
            except subprocess.TimeoutExpired:
                codes[phase] = 124
        print(f"gpu-check: {phase} exit {codes[phase]} after {time.monotonic() - start:.0f} s", flush=True)
        (out / "table.txt").write_text(render(table_rows(out)) + "\n")
        (out / "gpu_check.json").write_text(json.dumps({"exit_codes": codes, "tiny": tiny, "measure": measure},
                                                       indent=1))
    return codes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m decision_pipeline gpu-check",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="the CPU variant at tiny shapes (CI)")
    ap.add_argument("--measure", action="store_true", help="the device measurement: the held-out rows + decode speeds")
    ap.add_argument("--phases", default=None, help="comma list of stages, smoke, decode (default: stages,smoke; "
                                                   "with --measure smoke,decode,stages)")
    ap.add_argument("--out", type=Path, default=None, help="folder for the table and the phases' JSON "
                                                           "(default: a new folder under /tmp)")
    ap.add_argument("--stage-config", type=Path, default=SMOLLM2_135M, help="config.json of the stages' model")
    ap.add_argument("--smoke-config", type=Path, default=QWEN3_4B, help="config.json of the smoke's model")
    args = ap.parse_args(argv)
    import torch
    if not args.tiny and not torch.cuda.is_available():
        build = torch.__version__ + ("" if torch.version.cuda else ", a CPU-only build")
        print(f"gpu-check: torch {build} sees no GPU; install the CUDA torch (`make gpu-install`) on a machine with "
              "an NVIDIA driver, or run `make gpu-check TINY=1` for the CPU variant", file=sys.stderr)
        return 2
    phases = (args.phases or ("smoke,decode,stages" if args.measure else "stages,smoke")).split(",")
    try:
        for config in (args.stage_config, args.smoke_config):
            read_config(config)
        for phase in phases:
            phase_command(phase, Path("."), args.tiny, args.measure, args.stage_config, args.smoke_config, 60)
    except PipelineError as exc:
        print(f"gpu-check: {exc}", file=sys.stderr)
        return 2
    out = args.out or Path(f"/tmp/gpu-check-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    codes = run_phases(phases, out, args.tiny, args.measure, args.stage_config, args.smoke_config)
    print((out / "table.txt").read_text(), end="")
    print(f"gpu-check: table and JSON in {out} (log: {out / 'log.txt'})")
    failed = {p: c for p, c in codes.items() if c != 0}
    if failed:
        print("gpu-check: failed phases: " + ", ".join(f"{p} (exit {c}{', time limit' if c == 124 else ''})"
                                                     for p, c in failed.items()) + f"; see {out / 'log.txt'}",
              file=sys.stderr)
        return 1
    return 0


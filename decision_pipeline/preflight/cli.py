"""`python -m decision_pipeline preflight {check,plan,hours,compare,record}`: the GPU profile's checks before any stage runs.

check:   every outside input a profile needs, all failures listed, exit 2 (`make preflight`).
plan:    predicted peak GiB per GPU-heavy stage beside --gpu-gib, exit 2 naming stage and knob (`make memory-plan`).
hours:   expected first-run hours per stage from the plan's token counts and the measured throughputs
         (tests/fixtures/h200_memory.json, with their provenance; vLLM's rate is an assumption until measured).
compare: the plan beside a measured table (--measured, default the H200 fixture), fitted and held-out rows apart;
         exit 2 past 15% on a measured row or on a row the plan cannot compute.
record:  the table (--measured) with its held-out rows filled from a device smoke (--smoke smoke.json, --env
         env.json), written to --out (scripts/gpu_measure.sh); commit it over tests/fixtures/h200_memory.json.
Nothing else is written: the profile is merged in memory.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from decision_pipeline.common.errors import PipelineError

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "qwen3_4b"


def _gpu_gib(arg: float | None) -> tuple[float, str]:
    if arg:
        return arg, ""
    import torch
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory / 1024 ** 3, ""
    return 80.0, " (no GPU visible: planned for 80 GiB; pass --gpu-gib)"


def _compare(measured: str | None) -> int:
    """The plan beside every row of a measured table; exit 2 when a row is past the tolerance or not plannable."""
    from decision_pipeline.preflight.measured import H200, TOLERANCE, compare, load, render
    try:
        data = load(measured or H200)
        rows = compare(data)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render(rows, data["provenance"]))
    outside = [c for c in rows if c.outside]
    for c in outside:
        print(f"compare: {c.label}: plan {c.plan_gib:.1f} GiB vs measured {c.measured_gib:.1f} ({c.rel:+.0%}); "
              "the plan's formula for this path needs a fix (decision_pipeline/preflight/plan.py)", file=sys.stderr)
    return 2 if outside else 0


def _record(measured: str | None, smoke: str | None, env: str | None, out: str | None, commit: str) -> int:
    """The measured table with its held-out rows filled from a smoke.json, written atomically to `out`."""
    from decision_pipeline.common.io import write_text_atomic
    from decision_pipeline.preflight.measured import H200, dump_table, load, record
    if not smoke or not out:
        print("error: record needs --smoke (a smoke.json of scripts/gpu_measure.sh) and --out (where the table goes)",
              file=sys.stderr)
        return 2
    try:
        table = load(measured or H200)
        raw = load_json_object(Path(smoke), "--smoke")
        info = load_json_object(Path(env), "--env") if env else {}
        filled, missing = record(table, raw, info, commit)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_text_atomic(out, dump_table(filled))
    done = sum(1 for r in filled["memory"] if r.get("set") == "held_out" and "measured_gib" in r)
    print(f"record: {out}: {done} held-out row(s) measured" + (f"; not measured: {'; '.join(missing)}" if missing else ""))
    return 0


def load_json_object(path: Path, flag: str) -> dict:
    """A JSON object from `path`; anything else is one line naming the flag and the file."""
    import json
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PipelineError(f"{flag} {path}: not a readable JSON file ({exc}); pass what scripts/gpu_measure.sh "
                            "wrote") from None
    if not isinstance(data, dict) or ("rows" in data and not isinstance(data["rows"], list)):
        raise PipelineError(f"{flag} {path}: expected a JSON object; pass what scripts/gpu_measure.sh wrote")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m decision_pipeline preflight", description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("check", "plan", "hours", "compare", "record"))
    ap.add_argument("--profile", default="default", help="profiles/<name>.yaml merged over params.yaml")
    ap.add_argument("--params", default=None, help="an already merged params file (wins over --profile)")
    ap.add_argument("--gpu-gib", type=float, default=None, help="memory of one GPU; default: the visible card")
    ap.add_argument("--model-config", default=None, help="config.json to plan with (default: base_model.path)")
    ap.add_argument("--root", default=".", help="repository root (params.yaml, profiles/, reviews/)")
    ap.add_argument("--no-triton", action="store_true", help="plan TRL's torch fallback instead of its Triton kernels "
                                                             "(a CUDA torch without triton)")
    ap.add_argument("--measured", default=None, help="measured table for compare/hours/record (default: the H200 "
                                                     "fixture)")
    ap.add_argument("--smoke", default=None, help="record: the smoke.json whose rows fill the held-out rows")
    ap.add_argument("--env", default=None, help="record: the env.json beside it (versions, GPU)")
    ap.add_argument("--out", default=None, help="record: where the filled table is written")
    ap.add_argument("--commit", default="?", help="record: the commit the rows were measured at")
    args = ap.parse_args(argv)
    if args.command == "compare":
        return _compare(args.measured)
    if args.command == "record":
        return _record(args.measured, args.smoke, args.env, args.out, args.commit)
    from decision_pipeline.preflight.profile import profile_params
    start = time.monotonic()
    try:
        params = profile_params(args.profile, args.root, args.params)
        if args.command == "hours":
            from decision_pipeline.preflight.hours import render_hours
            print(render_hours(params, args.measured))
            return 0
        gib, note = _gpu_gib(args.gpu_gib)
        if args.command == "plan":
            from decision_pipeline.preflight.plan import _get, failures, memory_plan, read_shape, render
            source = args.model_config or _get(params, "base_model.path", "")
            if not args.model_config and not (Path(source) / "config.json").is_file():
                print(f"note: {source or 'base_model.path'} has no config.json yet: planning with {FIXTURE} (the "
                      "published Qwen3-4B shapes); pass --model-config / MODEL_CONFIG= for another model")
                source = str(FIXTURE)
            shape = read_shape(source)
            plans = memory_plan(params, shape, gib, triton=not args.no_triton)
            print(f"memory plan for {source}, {gib:g} GiB per GPU{note}")
            print(render(plans, gib))
            errs = failures(plans, gib)
        else:
            from decision_pipeline.preflight.checks import preflight
            errs = preflight(params, Path(args.root), gib, args.model_config)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in errs:
        print(line, file=sys.stderr)
    took = time.monotonic() - start
    if errs:
        print(f"{args.command}: {len(errs)} problem(s) for profile {args.params or args.profile} ({took:.1f} s)",
              file=sys.stderr)
        return 2
    print(f"{args.command}: ok for profile {args.params or args.profile} ({took:.1f} s){note}")
    return 0


"""The real stages, end to end, on a random-weight model directory: what `make gpu-check` runs first.

Why: the memory plan and the smoke check the big steps; this checks that the stages themselves
(their entry points, params, files and the hf backend) run on the device `runtime.device` resolves
to. The chain is tests/pipeline/test_real_checkpoint.py's: items -> base_model -> generate ->
select_chains -> sft -> calibrate -> evaluate -> rl -> s1mb_data -> s1mb, on the micro profile shrunk
further, each stage started as its module's `__main__` (`runpy`, in this one process, so imports are
paid once) with its seconds and peak GPU memory recorded. The model is SmolLM2-135M's config
(tests/fixtures/smollm2_135m) with random weights and the pipeline's own tokenizer; everything is
written under `--work` (a temporary directory by default), never under data/ or models/.
"""
from __future__ import annotations

import argparse
import json
import runpy
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.preflight.model_dirs import SMOLLM2_135M, TINY, build_tokenizer, read_config, write_model_dir

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024 ** 3
CHANGES = {
    "items.per_cell": 4,
    "base_model.source": "path", "base_model.nll_items": 2, "base_model.threads": 2,
    "base_model.add_think_tokens": False,
    "generate.max_questions": 1, "generate.k": 2, "generate.max_new_tokens": 16, "generate.batch_size": 2,
    "generate.chunk": 1,
    "sft.lr_source": "fixed", "sft.lr": 1e-4, "sft.max_steps": 2, "sft.batch_size": 2, "sft.save_steps": 2,
    "sft.dev_items": 2, "sft.embedding_tokens": "seen", "sft.warmup_steps": 0,
    "calibrate.items": 10, "calibrate.resplits": 2,
    "evaluate.max_items": 4, "evaluate.bootstrap": 10, "evaluate.answering.max_new_tokens": 12,
    "evaluate.answering.batch_size": 4,
    "rl.max_steps": 2, "rl.prompts_per_round": 2, "rl.num_generations": 2, "rl.steps_per_generation": 2,
    "rl.max_completion_length": 12, "rl.save_steps": 2, "rl.warmup_steps": 0, "rl.lr": 1e-4,
    "s1mb_data.max_cases": 3, "s1mb.batch_size": 4, "s1mb.max_new_tokens": 12,
}


def params_file(work: Path, changes: dict) -> Path:
    """The micro profile with `changes` (dotted keys that must exist there) as a params file in `work`."""
    from decision_pipeline.common.profiles import merged_profile
    data = merged_profile("micro", ROOT)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node[key]
        if last not in node:
            raise PipelineError(f"stage chain: {dotted} is not a micro-profile key; update preflight/stage_chain.py")
        node[last] = value
    path = work / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(stage: str, argv: list[str], dev: torch.device) -> dict:
    """One stage as `python -m stages.<stage> argv...` would run it; its exit code, seconds, peak GiB."""
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    saved = sys.argv
    sys.argv = [f"stages/{stage}.py", *argv]
    start = time.perf_counter()
    try:
        runpy.run_module(f"stages.{stage}", run_name="__main__", alter_sys=False)
        rc = 0
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.argv = saved
    peak = torch.cuda.max_memory_allocated() / GIB if dev.type == "cuda" else None
    return {"stage": stage, "device": dev.type, "rc": rc, "seconds": round(time.perf_counter() - start, 2),
            "peak_gib": None if peak is None else round(peak, 3)}


def run_chain(model_dir: Path, work: Path, dev: torch.device, json_out: Path | None = None) -> list[dict]:
    """Every stage of the chain in order; stops at the first that fails. Rows go to `json_out` as they finish."""
    from decision_pipeline.questions.schema import load_items
    params = str(params_file(work, {**CHANGES, "base_model.path": str(model_dir), "runtime.device": dev.type}))
    t = work
    items = str(t / "items.parquet")
    common = ["--params", params, "--items", items]
    temps = str(t / "cal" / "temperatures.json")

    def prepare_rl() -> None:
        rl_ids = [q["id"] for q in load_items(items, split="rl")[:2]]
        (t / "selected.jsonl").write_text("".join(json.dumps({"id": i, "origin": "fresh"}) + "\n" for i in rl_ids))
        (t / "probe.jsonl").write_text("".join(json.dumps({"id": i, "k": 2, "correct": 1}) + "\n" for i in rl_ids))

    (t / "choose_lr.json").write_text("{}")
    chain = [
        ("items", ["--params", params, "--out", items, "--metrics", str(t / "m_items.json")], None),
        ("base_model", [*common, "--pretrained", str(model_dir), "--out", str(t / "base"),
                        "--metrics", str(t / "m_base.json")], None),
        ("generate", [*common, "--model", str(t / "base"), "--out", str(t / "gen"), "--metrics", str(t / "m_gen.json"),
                      "--timings", str(t / "timings_gen.json")], None),
        ("select_chains", [*common, "--chains", str(t / "gen" / "chains.jsonl"), "--out", str(t / "kept.jsonl"),
                           "--metrics", str(t / "m_sel.json")], None),
        ("sft", [*common, "--base", str(t / "base"), "--kept", str(t / "kept.jsonl"),
                 "--chains", str(t / "gen" / "chains.jsonl"), "--chosen", str(t / "choose_lr.json"),
                 "--work", str(t / "sft_work"), "--out", str(t / "sft"), "--metrics", str(t / "m_sft.json"),
                 "--plots", str(t / "plots_sft"), "--timings", str(t / "timings_sft.json")], None),
        ("calibrate", [*common, "--model", str(t / "sft"), "--out", str(t / "cal"), "--metrics", str(t / "m_cal.json")],
         None),
        ("evaluate", [*common, "--model", str(t / "sft"), "--temps", temps, "--out", str(t / "eval"),
                      "--metrics", str(t / "m_eval.json"), "--plots", str(t / "plots_eval"), "--baseline="], None),
        ("rl", [*common, "--model", str(t / "sft"), "--selected", str(t / "selected.jsonl"),
                "--probe", str(t / "probe.jsonl"), "--work", str(t / "rl_work"), "--out", str(t / "rl"),
                "--metrics", str(t / "m_rl.json"), "--plots", str(t / "plots_rl"),
                "--timings", str(t / "timings_rl.json")], prepare_rl),
        ("s1mb_data", [*common, "--out", str(t / "bench"), "--metrics", str(t / "m_s1d.json")], None),
        ("s1mb", ["sft", "--params", params, "--data", str(t / "bench"), "--model-dir", str(t / "sft"),
                  "--temps", temps, "--out", str(t / "s1mb"), "--metrics", str(t / "m_s1mb.json")], None),
    ]
    rows: list[dict] = []
    for stage, argv, before in chain:
        if before is not None:
            before()
        rows.append(_run(stage, argv, dev))
        if json_out is not None:
            json_out.write_text(json.dumps({"rows": rows}, indent=1))
        if rows[-1]["rc"] != 0:
            break
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m decision_pipeline stage-chain",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="CPU, tiny config (CI)")
    ap.add_argument("--model-config", default=str(SMOLLM2_135M), help="config.json of the random-weight model")
    ap.add_argument("--work", type=Path, default=None, help="where the stages write (default: a temporary directory)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    dev = torch.device("cpu" if args.tiny or not torch.cuda.is_available() else "cuda")
    if not args.tiny and dev.type != "cuda":
        print(f"stage chain: torch {torch.__version__} sees no GPU; pass --tiny for the CPU check", file=sys.stderr)
        return 2
    try:
        config = read_config(args.model_config, TINY if args.tiny else None)
        with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
            work = args.work or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            model_dir = write_model_dir(config, work / "model", build_tokenizer())
            rows = run_chain(model_dir, work, dev, args.json)
    except PipelineError as exc:
        print(f"stage chain: {exc}", file=sys.stderr)
        return 2
    for r in rows:
        print(json.dumps(r), flush=True)
    return 0 if rows and all(r["rc"] == 0 for r in rows) else 1


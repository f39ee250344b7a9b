"""The measured GPU table (tests/fixtures/h200_memory.json) and the memory plan's figure for each row.

Why a file with provenance: the plan is only as good as the last measurement it was checked against;
the table says on what machine, with which versions and at which commit each figure was measured,
and `python -m decision_pipeline preflight compare` (and a CPU test) recomputes every row with the
plan and fails past TOLERANCE. Rows name the code path they measured (`loss`: joint | hf_loss for
SFT; trl_fused_lm_head | selective_log_softmax | fp32_log_softmax for GRPO; `triton`: whether TRL's
Triton kernels ran), so the plan is compared with the code that actually ran. scripts/gpu_measure.sh
writes rows of the same form (smoke.json) for a new machine or version.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.preflight.plan import (GRPO_LOSSES, SFT_LOSSES, ModelShape, StagePlan, grpo_peak,
                                              read_shape, readout_peak, sft_peak)

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "h200_memory.json"
TOLERANCE = 0.15
ROW_KEYS = {"readout": ("rows", "prefix_tokens", "batch_tokens"), "post-chain readout": ("rows", "prefix_tokens",
                                                                                         "batch_tokens"),
            "sft": ("rows", "length", "loss"), "grpo": ("micro", "prompt", "completion", "loss")}


@dataclass
class Compared:
    """One row: what was measured, what the plan says, the relative difference."""
    label: str
    measured_gib: float
    plan_gib: float

    @property
    def rel(self) -> float:
        return self.plan_gib / self.measured_gib - 1.0


def load(path: str | Path = H200) -> dict:
    """The measured table; an unreadable file is one line naming it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PipelineError(f"{path}: cannot read the measured table ({exc.strerror}); pass the JSON scripts/"
                            "gpu_measure.sh wrote, or tests/fixtures/h200_memory.json") from None
    except json.JSONDecodeError as exc:
        raise PipelineError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); fix the file") from None
    if isinstance(data, dict) and isinstance(data.get("rows"), list) and "memory" not in data:
        data = from_smoke(data)           # a smoke.json of scripts/gpu_smoke.sh / gpu_measure.sh
    if not isinstance(data, dict) or not isinstance(data.get("memory"), list) or "provenance" not in data:
        raise PipelineError(f"{path}: expected an object with 'provenance' and a 'memory' list of rows; see "
                            "tests/fixtures/h200_memory.json")
    return data


def from_smoke(smoke: dict) -> dict:
    """A smoke.json (rows measured by preflight/smoke.py) as a measured table: each row's shape, code path and
    peak; rows without a measured peak (CPU) are left out. Its provenance is what the file says (device, torch);
    date and commit are for whoever commits the rows to the fixture to add."""
    memory = []
    for r in smoke["rows"]:
        d, peak = r.get("detail", {}), r.get("peak_gib")
        if peak is None:
            continue
        row = {"stage": r["stage"], "measured_gib": round(float(peak), 2), "lora_r": d.get("lora_r")}
        if r["stage"] == "sft":
            row.update(rows=d["rows"], length=d["length"], loss=d.get("loss", "joint"),
                       accumulation=d.get("accumulation", 1))
        elif r["stage"] == "grpo":
            row.update(micro=d["micro"], prompt=d["prompt"], completion=d["completion"], loss="trl_fused_lm_head",
                       triton=d.get("logprob_path") == "triton")
        else:
            row.update(rows=d["rows"], prefix_tokens=d["prefix_tokens"], batch_tokens=d["batch_tokens"])
        memory.append({k: v for k, v in row.items() if v is not None})
    return {"provenance": {"machine": smoke.get("device", "?"), "versions": {"torch": smoke.get("torch", "?")},
                           "date": "?", "commit": "?"},
            "model_config": "tests/fixtures/qwen3_4b/config.json", "lora_r": 64,
            "lora_targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            "gradient_checkpointing": True, "memory": memory}


def label(row: dict) -> str:
    """A row's short name: stage, shape and code path."""
    if row.get("stage") == "sft":
        return f"sft {row.get('rows')}x{row.get('length')} {row.get('loss')}"
    if row.get("stage") == "grpo":
        return (f"grpo {row.get('micro')}x({row.get('prompt')}+{row.get('completion')}) {row.get('loss')}"
                f"{' triton' if row.get('triton', True) else ' torch'}")
    return f"{row.get('stage')} {row.get('rows')}x{row.get('prefix_tokens')}"


def plan_row(row: dict, shape: ModelShape, lora_r: int, targets: list[str], ckpt: bool, where: str) -> StagePlan:
    """The plan for one measured row; a row the plan cannot compute is one line naming it and the fix."""
    stage = row.get("stage")
    if stage not in ROW_KEYS:
        raise PipelineError(f"{where}: stage {stage!r} has no plan; use one of {', '.join(ROW_KEYS)} (or drop the row)")
    missing = [k for k in (*ROW_KEYS[stage], "measured_gib") if k not in row]
    if missing:
        raise PipelineError(f"{where} ({stage}): key {missing[0]!r} missing; a {stage} row needs "
                            f"{', '.join(ROW_KEYS[stage])} and measured_gib")
    loss = row.get("loss")
    if stage == "sft" and loss not in SFT_LOSSES or stage == "grpo" and loss not in GRPO_LOSSES:
        known = SFT_LOSSES if stage == "sft" else GRPO_LOSSES
        raise PipelineError(f"{where} ({stage}): loss path {loss!r} has no plan; use one of {', '.join(known)}")
    try:
        if stage == "sft":
            return sft_peak(shape, int(row["rows"]), int(row["length"]), lora_r, targets, ckpt, loss,
                            int(row.get("accumulation", 1)))
        if stage == "grpo":
            return grpo_peak(shape, int(row["micro"]), int(row["prompt"]), int(row["completion"]), lora_r, targets,
                             ckpt, loss, bool(row.get("triton", True)), int(row.get("accumulation", 1)))
        return readout_peak(shape, int(row["prefix_tokens"]), int(row["rows"]), int(row["batch_tokens"]), stage)
    except (TypeError, ValueError) as exc:
        raise PipelineError(f"{where} ({stage}): {exc}; shapes must be whole numbers") from None


def compare(data: dict, root: Path = ROOT) -> list[Compared]:
    """Every memory row of a measured table beside the plan's allocator peak."""
    shape = read_shape(root / data.get("model_config", "tests/fixtures/qwen3_4b/config.json"))
    r, targets = int(data.get("lora_r", 64)), list(data.get("lora_targets", []))
    ckpt = bool(data.get("gradient_checkpointing", True))
    out = []
    for i, row in enumerate(data["memory"]):
        if not isinstance(row, dict):
            raise PipelineError(f"memory row {i + 1}: expected an object with stage, shape and measured_gib")
        plan = plan_row(row, shape, int(row.get("lora_r", r)), targets, ckpt, f"memory row {i + 1}")
        out.append(Compared(label(row), float(row["measured_gib"]), plan.allocated_gib))
    return out


def render(rows: list[Compared], provenance: dict) -> str:
    """The comparison table with the measurement's provenance."""
    versions = ", ".join(f"{k} {v}" for k, v in provenance.get("versions", {}).items())
    lines = [f"measured: {provenance.get('machine', '?')}, {provenance.get('date', '?')}, {provenance.get('commit', '?')}"
             f" ({versions})",
             f"{'row':<52} {'measured GiB':>12} {'plan GiB':>9} {'diff':>7}"]
    for c in rows:
        flag = "" if abs(c.rel) <= TOLERANCE else "  OUTSIDE 15%"
        lines.append(f"{c.label:<52} {c.measured_gib:>12.1f} {c.plan_gib:>9.1f} {c.rel:>+7.1%}{flag}")
    return "\n".join(lines)

"""The measured GPU table (tests/fixtures/h200_memory.json) and the memory plan's figure for each row.

Why a file with provenance: the plan is only as good as the last measurement it was checked against;
the table says on what machine, with which versions and at which commit each figure was measured,
and `python -m decision_pipeline preflight compare` (and a CPU test) recomputes every row with the
plan and fails past TOLERANCE. Rows name the code path they measured (`loss`: joint | hf_loss for
SFT, `chunk` the joint loss's positions per chunk; trl_fused_lm_head | selective_log_softmax |
fp32_log_softmax for GRPO; `triton`: whether TRL's Triton kernels ran), so the plan is compared with the
code that actually ran.

Why two sets: the plan's constants were fitted on the `fitted` rows, so agreeing with them says little.
`held_out` rows are configurations no constant was fitted on (another length, LoRA rank, micro-batch,
the joint loss, TRL's fused head); they are listed before they are measured ("not yet measured"), the
device smoke measures exactly them (`smoke --shapes heldout`), and `record` writes the measured peaks
into a copy of the table with each row's own provenance (scripts/gpu_measure.sh).
"""
from __future__ import annotations

import json
import time
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
SETS = ("fitted", "held_out")
# what identifies a row's configuration (a smoke row fills the held-out row with the same key)
MATCH_KEYS = ("stage", "rows", "length", "loss", "chunk", "micro", "prompt", "completion", "prefix_tokens",
              "batch_tokens", "lora_r")


@dataclass
class Compared:
    """One row: what was measured (None: a held-out row not yet measured), what the plan says, the relative
    difference, the row's set and, for a held-out row, where it was measured."""
    label: str
    measured_gib: float | None
    plan_gib: float
    held_out: bool = False
    where: str = ""

    @property
    def rel(self) -> float | None:
        return None if self.measured_gib is None else self.plan_gib / self.measured_gib - 1.0

    @property
    def outside(self) -> bool:
        return self.rel is not None and abs(self.rel) > TOLERANCE


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
        row = {"stage": r["stage"], "set": "held_out", "measured_gib": round(float(peak), 2), "lora_r": d.get("lora_r")}
        if r["stage"] == "sft":
            row.update(rows=d["rows"], length=d["length"], loss=d.get("loss", "joint"), chunk=d.get("chunk"),
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
    """A row's short name: stage, shape and code path (and its LoRA rank where the row sets one)."""
    rank = f" r{row['lora_r']}" if "lora_r" in row else ""
    if row.get("stage") == "sft":
        chunk = f" chunk {row['chunk']}" if row.get("chunk") else ""
        return f"sft {row.get('rows')}x{row.get('length')} {row.get('loss')}{chunk}{rank}"
    if row.get("stage") == "grpo":
        return (f"grpo {row.get('micro')}x({row.get('prompt')}+{row.get('completion')}) {row.get('loss')}"
                f"{' triton' if row.get('triton', True) else ' torch'}{rank}")
    return f"{row.get('stage')} {row.get('rows')}x{row.get('prefix_tokens')}"


def plan_row(row: dict, shape: ModelShape, lora_r: int, targets: list[str], ckpt: bool, where: str) -> StagePlan:
    """The plan for one measured row; a row the plan cannot compute is one line naming it and the fix."""
    stage = row.get("stage")
    if stage not in ROW_KEYS:
        raise PipelineError(f"{where}: stage {stage!r} has no plan; use one of {', '.join(ROW_KEYS)} (or drop the row)")
    held_out = row.get("set", "fitted") == "held_out"
    missing = [k for k in (*ROW_KEYS[stage], *(() if held_out else ("measured_gib",))) if k not in row]
    if missing:
        raise PipelineError(f"{where} ({stage}): key {missing[0]!r} missing; a {stage} row needs "
                            f"{', '.join(ROW_KEYS[stage])} and measured_gib (a held-out row may lack it)")
    loss = row.get("loss")
    if stage == "sft" and loss not in SFT_LOSSES or stage == "grpo" and loss not in GRPO_LOSSES:
        known = SFT_LOSSES if stage == "sft" else GRPO_LOSSES
        raise PipelineError(f"{where} ({stage}): loss path {loss!r} has no plan; use one of {', '.join(known)}")
    try:
        if stage == "sft":
            return sft_peak(shape, int(row["rows"]), int(row["length"]), lora_r, targets, ckpt, loss,
                            int(row.get("accumulation", 1)), int(row.get("chunk") or 0))
        if stage == "grpo":
            return grpo_peak(shape, int(row["micro"]), int(row["prompt"]), int(row["completion"]), lora_r, targets,
                             ckpt, loss, bool(row.get("triton", True)), int(row.get("accumulation", 1)))
        return readout_peak(shape, int(row["prefix_tokens"]), int(row["rows"]), int(row["batch_tokens"]), stage)
    except (TypeError, ValueError) as exc:
        raise PipelineError(f"{where} ({stage}): {exc}; shapes must be whole numbers") from None


def _where(provenance: dict) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in provenance.get("versions", {}).items())
    return (f"{provenance.get('machine', '?')}, {provenance.get('date', '?')}, {provenance.get('commit', '?')}"
            + (f" ({versions})" if versions else ""))


def compare(data: dict, root: Path = ROOT) -> list[Compared]:
    """Every memory row of a measured table beside the plan's allocator peak, fitted rows first."""
    shape = read_shape(root / data.get("model_config", "tests/fixtures/qwen3_4b/config.json"))
    r, targets = int(data.get("lora_r", 64)), list(data.get("lora_targets", []))
    ckpt = bool(data.get("gradient_checkpointing", True))
    out = []
    for i, row in enumerate(data["memory"]):
        where = f"memory row {i + 1}"
        if not isinstance(row, dict):
            raise PipelineError(f"{where}: expected an object with stage, shape and measured_gib")
        if row.get("set", "fitted") not in SETS:
            raise PipelineError(f"{where}: set {row['set']!r} is unknown; use fitted or held_out")
        plan = plan_row(row, shape, int(row.get("lora_r", r)), targets, ckpt, where)
        measured = row.get("measured_gib")
        held_out = row.get("set") == "held_out"
        out.append(Compared(label(row), None if measured is None else float(measured), plan.allocated_gib, held_out,
                            _where(row["provenance"]) if held_out and "provenance" in row else ""))
    return sorted(out, key=lambda c: c.held_out)


def _line(c: Compared) -> str:
    if c.rel is None:
        return f"{c.label:<52} {'not yet measured':>16} {c.plan_gib:>9.1f}"
    flag = "  OUTSIDE 15%" if c.outside else ""
    return f"{c.label:<52} {c.measured_gib:>16.1f} {c.plan_gib:>9.1f} {c.rel:>+7.1%}{flag}"


def render(rows: list[Compared], provenance: dict) -> str:
    """The comparison table: the fitted rows (with the table's provenance), then the held-out ones (each
    measured row's own provenance), then one line per set."""
    head = f"{'row':<52} {'measured GiB':>16} {'plan GiB':>9} {'diff':>7}"
    fitted, held = [c for c in rows if not c.held_out], [c for c in rows if c.held_out]
    lines = [f"fitted rows (the plan's constants were fitted on them), measured: {_where(provenance)}", head]
    lines += [_line(c) for c in fitted]
    lines += ["", "held-out rows (configurations no constant was fitted on)", head]
    for c in held:
        lines.append(_line(c) + (f"  [{c.where}]" if c.where else ""))
    for name, group in (("fitted", fitted), ("held out", held)):
        measured = [c for c in group if c.rel is not None]
        worst = max((abs(c.rel) for c in measured), default=None)
        lines.append(f"{name}: {len(measured)} of {len(group)} measured"
                     + ("" if worst is None else f", largest difference {worst:.1%}"))
    return "\n".join(lines)


def dump_table(table: dict) -> str:
    """The table as the fixture lays it out: one memory row per line (a recorded table diffs row by row)."""
    parts = []
    for key, value in table.items():
        if key == "memory":
            rows = ",\n".join("  " + json.dumps(r) for r in value)
            parts.append(f' "memory": [\n{rows}\n ]')
        elif isinstance(value, dict):
            inner = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
            parts.append(f" {json.dumps(key)}: {{\n{inner}\n }}")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _key(row: dict, default_rank: int) -> tuple:
    """A row's configuration, for matching a smoke row with the table's held-out row."""
    full = {"lora_r": default_rank, **row}
    if full.get("stage") == "sft" and not full.get("chunk"):
        full["chunk"] = 0
    return tuple(full.get(k) for k in MATCH_KEYS)


def record(table: dict, smoke: dict, env: dict, commit: str = "?") -> tuple[dict, list[str]]:
    """A copy of `table` whose held-out rows carry what `smoke` (a smoke.json) measured for the same
    configuration, each with its provenance from `env` (scripts/gpu_measure.sh's env.json); returns the table
    and the labels of held-out rows the smoke did not measure."""
    default_rank = int(table.get("lora_r", 64))
    measured = {_key(r, default_rank): r for r in from_smoke(smoke)["memory"]}
    provenance = {"machine": f"{env.get('gpu', smoke.get('device', '?'))} ({env.get('gpu_gib', '?')} GiB)",
                  "date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": commit,
                  "versions": {k: env[k] for k in ("python", "torch", "transformers", "peft", "trl", "triton")
                               if k in env},
                  "how": "scripts/gpu_measure.sh (preflight/smoke.py --shapes heldout); torch.cuda.max_memory_allocated"}
    out, missing = json.loads(json.dumps(table)), []
    for row in out["memory"]:
        if row.get("set") != "held_out":
            continue
        hit = measured.get(_key(row, default_rank))
        if hit is None:
            missing.append(label(row))
            continue
        row["measured_gib"] = hit["measured_gib"]
        if "triton" in hit:
            row["triton"] = hit["triton"]
        row["provenance"] = provenance
    return out, missing

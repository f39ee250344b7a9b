"""Live SFT progress (#36.1): the trainer's real callback prints at the cadence and writes the DVCLive
files; a `kill -9`ed `sft` stage resumed with `--live` ends with the uninterrupted run's live files."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.io import write_json, write_jsonl, write_table
from decision_pipeline.common.params import from_dict
from decision_pipeline.common.profiles import merged_profile
from decision_pipeline.common.progress import LiveMetrics, TrainingProgress
from decision_pipeline.questions.splits import ItemsParams, build_items
from decision_pipeline.decision.sft.data import build_joint_examples
from decision_pipeline.decision.sft.config import SFTParams
from decision_pipeline.decision.sft.trainer import joint_values, train_joint
from decision_pipeline.lm.model import load_model
from decision_pipeline.questions.schema import QUESTION_SCHEMA
from tests.micro import micro_params
from tests.pipeline.kill_helpers import Forker

ROOT = Path(__file__).resolve().parents[2]


class StepClock:
    """A clock that moves 4 s each time it is read: the trainer's callback reads it once per step."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 4.0
        return self.now


def tsv(root: Path, key: str) -> list[list[str]]:
    return [line.split("\t") for line in (root / "plots" / "metrics" / "train" / f"{key}.tsv").read_text().splitlines()]


def test_sft_callback_prints_at_the_cadence_and_writes_every_step(tiny_dir, tiny, questions, tmp_path):
    _, tok = tiny
    kept = [{"id": f"c{i}", "question_id": q["id"], "text": "<think>\nx\n</think>\nAnswer: A"}
            for i, q in enumerate(questions[:8])]
    examples, _ = build_joint_examples(tok, questions[:8], kept, {}, 0.5, 1.0, 512)
    s = micro_params(SFTParams, "sft", lr_source="fixed", max_steps=6, threads=1, save_steps=0)
    out = io.StringIO()
    progress = TrainingProgress("sft", mode="lines", every=10.0, stream=out, clock=StepClock(), heartbeat=False,
                                live=LiveMetrics(tmp_path / "live"), shown=("loss", "readout_loss"))
    _, _, parts = train_joint(load_model(tiny_dir), tok, examples, s, 1e-3, 3, tmp_path / "work", progress=progress)
    progress.close()
    lines = out.getvalue().splitlines()
    # begin at 4 s, step k at 4 + 4k: a line once 10 s have passed (steps 3 and 6; 6 is also the last)
    assert lines[0] == "[sft] 6 steps; a progress line every 10s"
    assert [line.split(" | ")[0] for line in lines[1:]] == ["[sft] step 3/6 (50%)", "[sft] step 6/6 (100%)"]
    row = joint_values(parts[2], s.readout_weight)
    assert f"| loss {row['loss']:.4g} readout_loss {row['readout_loss']:.4g} |" in lines[1]
    assert "tok/s | 0:12 elapsed, ETA 0:12" in lines[1]
    live = tmp_path / "live"
    for key in ("loss", "chain_loss", "readout_loss"):
        assert tsv(live, key) == [["step", key]] + [[str(r["step"]), str(joint_values(r, s.readout_weight)[key])]
                                                     for r in parts]
    summary = json.loads((live / "metrics.json").read_text())
    assert summary == {"train": dict(sorted(joint_values(parts[-1], s.readout_weight).items())), "step": 6}


# ------------------------------------------------------------------ the stage, killed and resumed

@pytest.fixture(scope="module")
def sft_inputs(tmp_path_factory, tiny_dir) -> dict:
    """Items, kept chains, a chosen rate and params for a 12-step `sft` stage run checkpointing every 2 steps."""
    from decision_pipeline.decision.generate.generation import solver_record
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.questions.schema import load_items
    micro = merged_profile("micro", ROOT)
    root = tmp_path_factory.mktemp("sft_live_inputs")
    rows, _ = build_items(from_dict(ItemsParams, micro["items"], "items"), micro["base"]["seed"])
    write_table(root / "items.parquet", rows, QUESTION_SCHEMA)
    tok = load_tokenizer(tiny_dir)
    write_jsonl(root / "kept.jsonl", [solver_record(q, tok) for q in load_items(root / "items.parquet", split="pool")])
    write_json(root / "chosen.json", {"chosen_lr": 0.003})
    params = json.loads(json.dumps(micro))
    params["sft"].update(lr_source="sweep", max_steps=12, save_steps=2, threads=1, dev_items=4)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return {"root": root, "model": tiny_dir}


def _args(inputs: dict, run: Path) -> list:
    r = inputs["root"]
    return [["--params", str(r / "params.yaml"), "--base", inputs["model"], "--items", str(r / "items.parquet"),
             "--kept", str(r / "kept.jsonl"), "--chains", str(r / "kept.jsonl"), "--chosen", str(r / "chosen.json"),
             "--work", str(run / "work"), "--out", str(run / "sft"), "--metrics", str(run / "sft.json"),
             "--plots", str(run / "plots"), "--timings", str(run / "timings.json"), "--live", str(run / "live")]]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_sft_stage_killed_and_resumed_writes_the_uninterrupted_live_files(sft_inputs, tmp_path):
    forker = Forker(["stages.sft"], tmp_path)
    try:
        ref = tmp_path / "ref"
        rc, log = forker.run("stages.sft:main", _args(sft_inputs, ref), tmp_path / "ref.log")
        assert rc == 0, log
        run = tmp_path / "run"
        # killed once checkpoint 6 is sealed: training goes on meanwhile, so the live files hold steps past it
        rc = forker.run_until("stages.sft:main", _args(sft_inputs, run), tmp_path / "kill.log",
                              lambda: (run / "work" / "checkpoint-6" / "complete").is_file())
        assert rc == -9, (tmp_path / "kill.log").read_text()[-2000:]
        assert len(tsv(run / "live", "loss")) - 1 >= 6  # the killed run's live files, which the rerun must replace
        rc, log = forker.run("stages.sft:main", _args(sft_inputs, run), tmp_path / "final.log")
        assert rc == 0, log
    finally:
        forker.close()
    parts = json.loads((ref / "plots" / "loss_parts.json").read_text())
    assert [row[0] for row in tsv(ref / "live", "loss")[1:]] == [str(r["step"]) for r in parts] == [
        str(s) for s in range(1, 13)]
    assert _files(run / "live") == _files(ref / "live")

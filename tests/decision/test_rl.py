"""RL library: question selection, the work-directory claim, config checks, metrics, and kill/resume."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.questions.schema import normalised_key
from decision_pipeline.decision.rl.metrics import quarter_gain, round_rows
from decision_pipeline.decision.rl.config import RlSelectParams
from decision_pipeline.decision.rl.selection import mix, select_questions
from decision_pipeline.decision.rl.trainer import check_lora_targets, claim_rl_work, prompt_rows
from tests.decision import rl_helpers

HELPERS = Path(__file__).with_name("rl_helpers.py")


def _row(q: dict, origin: str, correct: int, gold_logit: float = 0.0, k: int = 4) -> dict:
    logits = [0.0] * len(q["options"])
    logits[[o["id"] for o in q["options"]].index(q["gold"])] = gold_logit
    return {"id": q["id"], "origin": origin, "correct": correct, "k": k, "readout_logits": logits}


def _shuffled_twin(q: dict, new_id: str) -> dict:
    return {**q, "id": new_id, "options": list(reversed(q["options"]))}


def test_select_funnel_counts_each_rule(questions):
    qs = questions[:12]
    pool, heldout = [qs[10]], [qs[11]]
    twin_of_heldout = _shuffled_twin(qs[11], "twin-heldout")
    twin_of_pool = _shuffled_twin(qs[10], "twin-pool")
    by_id = {q["id"]: q for q in qs + [twin_of_heldout, twin_of_pool]}
    rows = [_row(twin_of_heldout, "fresh", 2), _row(twin_of_pool, "fresh", 2), _row(qs[0], "fresh", 0),
            _row(qs[1], "fresh", 4), _row(qs[2], "sft", 2, gold_logit=-9.0), _row(qs[3], "sft", 2, gold_logit=9.0),
            _row(qs[4], "fresh", 1), _row(qs[5], "sft", 3), _row(qs[6], "sft", 2)]
    p = RlSelectParams(min_correct=1, max_correct=3, gold_prob_min=0.15, gold_prob_max=0.85, fresh_fraction=0.5)
    kept, m = select_questions(rows, by_id, pool, heldout, {}, p, seed=0)
    assert m["dropped"] == {"heldout_twin": 1, "duplicate": 0, "fresh_seen": 1, "too_few_correct": 1,
                            "too_many_correct": 1,
                            "gold_prob_low": 1, "gold_prob_high": 1, "mix_ratio": 1}
    assert [k["origin"] for k in kept] == ["fresh", "sft"] and m["kept"] == 2
    assert normalised_key(twin_of_heldout) == normalised_key(qs[11])  # the key ignores option order


def test_select_drops_the_later_of_two_twins(questions):
    q = questions[0]
    twin = _shuffled_twin(q, q["id"] + "-z")
    _, m = select_questions([_row(q, "sft", 2), _row(twin, "sft", 2)], {q["id"]: q, twin["id"]: twin}, [], [], {},
                            RlSelectParams(min_correct=1, max_correct=3, gold_prob_min=0.0, gold_prob_max=1.0, fresh_fraction=0.0), seed=0)
    assert m["dropped"]["duplicate"] == 1 and m["kept"] == 1


def test_zero_eligible_names_the_rule_that_removed_the_last(questions):
    rows = [_row(q, "sft", 4) for q in questions[:5]]
    with pytest.raises(PipelineError, match=r"rl_select.max_correct \(4\) must be below rl_probe.k \(4\)"):
        select_questions(rows, {q["id"]: q for q in questions}, [], [], {},
                         RlSelectParams(min_correct=0, max_correct=4, gold_prob_min=0.0, gold_prob_max=1.0,
                                        fresh_fraction=0.0), seed=0)
    with pytest.raises(PipelineError, match=r"no eligible questions: rule 'too_many_correct' removed the last "
                                            r"of 5 candidates \(too_many_correct 5\)"):
        select_questions(rows, {q["id"]: q for q in questions}, [], [], {},
                         RlSelectParams(min_correct=1, max_correct=3, gold_prob_min=0.0, gold_prob_max=1.0, fresh_fraction=0.0), seed=0)


def test_mix_keeps_the_ratio_in_every_prefix():
    fresh = [{"id": f"f{i}", "origin": "fresh"} for i in range(10)]
    sft = [{"id": f"s{i}", "origin": "sft"} for i in range(30)]
    kept, surplus = mix(fresh, sft, 0.25)
    assert len(kept) == 40 and surplus == 0
    for n in range(4, 41, 4):
        assert sum(k["origin"] == "fresh" for k in kept[:n]) == n // 4
    kept, surplus = mix(fresh, sft[:5], 0.5)
    assert len(kept) == 10 and surplus == 5


def test_gold_prob_band_uses_the_calibrated_temperature(questions):
    q = next(q for q in questions if q["task"] == "noul")
    row = _row(q, "sft", 2, gold_logit=3.0)  # p(gold) = 0.95 at T=1, 0.57 at T=10
    p = RlSelectParams(min_correct=1, max_correct=3, gold_prob_min=0.15, gold_prob_max=0.85, fresh_fraction=0.0)
    with pytest.raises(PipelineError, match="gold_prob_high"):
        select_questions([row], {q["id"]: q}, [], [], {}, p, seed=0)
    kept, _ = select_questions([row], {q["id"]: q}, [], [], {"noul": 10.0}, p, seed=0)
    assert kept[0]["gold_prob"] == pytest.approx(1 / (1 + np.exp(-0.3)), abs=1e-6)


def test_rl_params_reject_rounds_that_do_not_line_up():
    base = rl_helpers.toy_params()
    with pytest.raises(PipelineError, match="multiples of steps_per_generation"):
        dataclasses.replace(base, max_steps=5)
    with pytest.raises(PipelineError, match="must be divisible by steps_per_generation"):
        dataclasses.replace(base, prompts_per_round=3, num_generations=3)
    with pytest.raises(PipelineError, match="decisiveness_patterns"):
        dataclasses.replace(base, decisiveness_patterns=["(wait"])


def test_lora_targets_must_exist(tiny):
    model, _ = tiny
    check_lora_targets(model, ["q_proj", "down_proj"], "models/sft")
    with pytest.raises(PipelineError, match=r"models/sft: model has no Linear module named 'qkv' for the LoRA"):
        check_lora_targets(model, ["q_proj", "qkv"], "models/sft")


def test_prompt_rows_tokenize_to_the_thinking_prefix(tiny, questions):
    from decision_pipeline.decision.prompts import thinking_prefix
    _, tok = tiny
    rows = prompt_rows(tok, questions[:6])
    trl_ids = tok(text=[r["prompt"] for r in rows])["input_ids"]  # how TRL tokenizes a text prompt
    assert trl_ids == [thinking_prefix(tok, q) for q in questions[:6]]
    assert all(abs(sum(r["target"]) - 1) < 1e-9 for r in rows)


def test_claim_refuses_another_runs_checkpoints(tmp_path, capsys):
    work = tmp_path / "work"
    fp = {"params": "a", "data": "d", "base": "b", "code": "c", "trl": "1"}
    assert claim_rl_work(work, fp) == 0
    from decision_pipeline.decision.rl.trainer import digest_hash
    owner = digest_hash(json.dumps(fp, sort_keys=True))
    for step in (2, 4):
        (work / f"checkpoint-{step}").mkdir()
        (work / f"checkpoint-{step}" / "run_fingerprint.txt").write_text(owner + "\n")
    (work / "checkpoint-6").mkdir()  # killed while saving: no fingerprint written yet
    assert claim_rl_work(work, fp) == 4
    assert not (work / "checkpoint-6").exists()
    assert claim_rl_work(work, {**fp, "params": "other"}) == 0
    err = capsys.readouterr().err
    assert "belongs to another run (changed: params); starting afresh" in err
    assert not list(work.glob("checkpoint-*"))


def _rollouts(steps, rewards_by_step, k=2):
    rows = []
    for step, rewards in zip(steps, rewards_by_step):
        for qi, r in enumerate(rewards):
            for j in range(k):
                rows.append({"step": step, "question_id": f"s{step}q{qi}", "sample": j, "total": r, "closed": j == 0,
                             "answer": 1 if j == 0 else None, "gold_index": 1, "n_tokens": 10 + step, "markers": 0,
                             "rewards": {"correctness": r}})
    return rows


def test_quarter_gain_compares_first_and_last_quarter_prompts():
    rows = _rollouts([0, 2, 4, 6], [[-1.0, -0.8], [0.0, 0.0], [0.0, 0.1], [1.0, 0.8]])
    gain = quarter_gain(rows, 8, n_resamples=200, seed=0)
    assert gain["prompts_first"] == 2 and gain["prompts_last"] == 2
    assert gain["diff"] == pytest.approx(1.8) and gain["ci_low"] > 0
    rounds = round_rows(rows, [{"step": 1, "loss": 0.5, "entropy": 2.0}], 2)
    assert [r["step"] for r in rounds] == [0, 2, 4, 6] and rounds[0]["entropy"] == 2.0
    assert rounds[0]["mixed_group_share"] == 1.0 and rounds[0]["unfinished_share"] == 0.5


def _helper(model_dir: str, work: Path, steps: int) -> subprocess.Popen:
    """The toy run in its own process, its DVCLive files in `<work>-live`."""
    env = {**os.environ, "PIPELINE_QUIET": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen([sys.executable, str(HELPERS), model_dir, str(work), str(steps), f"{work}-live"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _live_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_adapter(toy_model_dir, tmp_path):
    full = _helper(toy_model_dir, tmp_path / "full", 6)
    out, err = full.communicate(timeout=300)
    assert full.returncode == 0, err[-2000:]
    straight = json.loads(out.strip().splitlines()[-1])
    assert straight["start"] == 0 and straight["moved"] > 0  # the adapter really trained
    work = tmp_path / "killed"
    proc = _helper(toy_model_dir, work, 6)
    deadline = time.time() + 300
    while not (work / "checkpoint-4" / "run_fingerprint.txt").exists():
        assert proc.poll() is None and time.time() < deadline, "run ended before its second checkpoint"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = _helper(toy_model_dir, work, 6)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-2000:]
    again = json.loads(out.strip().splitlines()[-1])
    assert again["start"] == 4
    assert again["digest"] == straight["digest"]
    assert (work / "rollouts.jsonl").read_bytes() == (tmp_path / "full" / "rollouts.jsonl").read_bytes()
    # the live metrics (#36.1): every step's loss, each round's reward, no timing; the resumed run's files
    # (the checkpoint's log history replayed, then trained on) equal the uninterrupted run's byte for byte
    full = _live_files(tmp_path / "full-live")
    assert {"plots/metrics/train/loss.tsv", "plots/metrics/train/reward.tsv",
            "plots/metrics/train/rewards/low_ids/mean.tsv"} <= set(full)
    assert not any("time" in name or "runtime" in name for name in full)
    steps = lambda name: [line.split("\t")[0] for line in full[name].decode().splitlines()[1:]]  # noqa: E731
    assert steps("plots/metrics/train/loss.tsv") == ["1", "2", "3", "4", "5", "6"]
    assert steps("plots/metrics/train/reward.tsv") == ["1", "3", "5"]  # a round's rewards log at its first step
    assert json.loads(full["metrics.json"])["step"] == 6
    assert _live_files(tmp_path / "killed-live") == full

"""Library pieces moved out of the evaluate / calibrate / choose_lr / sft entry points."""
import json

import numpy as np
import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import from_dict
from decision_pipeline.decision.evaluate.evaluation import answer_records, records_to_table, routing_at_30
from decision_pipeline.decision.sft.config import LrSweepParams, choose_lr
from decision_pipeline.decision.sft.run import checkpoint_loss_log, completed_step, prune_incomplete, seal_checkpoint


def _question(i: int, gold: str) -> dict:
    return {"id": f"q{i}", "family": "keyword", "level": 0, "task": "choice", "gold": gold,
            "options": [{"id": "a"}, {"id": "b"}]}


def _records(questions, logits, preds):
    chains = [{"thinking_pred": p, "chain_tokens": 5, "finish_reason": "stop", "text": "x", "post_logits": None}
              for p in preds]
    return answer_records(questions, [np.array(lg) for lg in logits], chains)


def test_baseline_records_are_aligned_by_id_not_position():
    qs = [_question(0, "a"), _question(1, "b")]
    recs = _records(qs, [[2.0, 0.0], [0.0, 3.0]], [0, 1])
    straight = records_to_table(recs, qs, {})
    shuffled = records_to_table(list(reversed(recs)), qs, {})
    assert np.array_equal(straight["readout_pred"], shuffled["readout_pred"])
    assert straight["readout_pred"].tolist() == [0, 1]


def test_baseline_missing_a_question_is_a_clear_error():
    qs = [_question(0, "a"), _question(1, "b")]
    recs = _records(qs[:1], [[2.0, 0.0]], [0])
    with pytest.raises(PipelineError, match="lack question 'q1'"):
        records_to_table(recs, qs, {})


def test_routing_at_30_reports_the_plain_change_beside_the_ratio():
    curve = [{"fraction": 0.3, "accuracy": 0.62, "readout_accuracy": 0.6, "thinking_accuracy": 0.7}]
    out = routing_at_30(curve)
    assert out["accuracy_change_at_30"] == pytest.approx(0.02)
    assert out["thinking_minus_readout"] == pytest.approx(0.1)


def test_choose_lr_reads_each_rate_and_names_a_missing_one(tmp_path):
    (tmp_path / "0.002.json").write_text(json.dumps({"dev": {"nll": 0.9}}))
    (tmp_path / "0.004.json").write_text(json.dumps({"dev": {"nll": 0.8}}))
    assert choose_lr([0.002, 0.004], str(tmp_path))["chosen_lr"] == 0.004
    with pytest.raises(PipelineError, match=r"0.008.json: missing; run `dvc repro lr_sweep@0.008`"):
        choose_lr([0.002, 0.008], str(tmp_path))


def test_empty_sweep_is_one_line_naming_the_key():
    with pytest.raises(PipelineError, match="lr_sweep.lrs is empty"):
        from_dict(LrSweepParams, {"lrs": [], "max_steps": 1, "max_examples": 1}, "params.yaml: lr_sweep")


def test_loss_log_survives_a_resume(tmp_path):
    """Each checkpoint carries the loss rows up to its step; only sealed checkpoints count."""
    first = [{"step": s, "chain_loss": 1.0 / s} for s in (1, 2, 3, 4)]
    (tmp_path / "checkpoint-2").mkdir()
    seal_checkpoint(tmp_path, 2, first[:2])
    (tmp_path / "checkpoint-4").mkdir()  # saved by the trainer, killed before it was sealed
    assert completed_step(tmp_path) == 2
    assert prune_incomplete(tmp_path) == ["checkpoint-4"] and not (tmp_path / "checkpoint-4").exists()
    assert checkpoint_loss_log(tmp_path, 2) == first[:2] and checkpoint_loss_log(tmp_path, 0) == []
    resumed = [{"step": s, "chain_loss": 0.5} for s in (3, 4)]
    merged = checkpoint_loss_log(tmp_path, 2) + resumed
    assert [r["step"] for r in merged] == [1, 2, 3, 4] and merged[2]["chain_loss"] == 0.5

def _world(n, off, rng):
    qs, lg, ch = [], [], []
    for i in range(n):
        qs.append({"id": f"q{i + off}", "family": ["keyword", "count"][i % 2], "level": 0, "task": "choice",
                   "gold": "abc"[i % 3], "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}]})
        lg.append(rng.normal(size=3))
        ch.append({"thinking_pred": int(rng.integers(0, 3)), "chain_tokens": 10, "finish_reason": "stop",
                   "text": "x", "post_logits": None})
    return qs, lg, ch


def test_evaluate_records_carries_the_decision_score_and_both_routers():
    from decision_pipeline.decision.evaluate.config import EvaluateParams
    from decision_pipeline.decision.evaluate.evaluation import evaluate_records
    from decision_pipeline.decision.evaluate.router import fit_router
    rng = np.random.default_rng(0)
    p = from_dict(EvaluateParams, {"answering": {"backend": "hf", "batch_size": 4, "max_new_tokens": 8,
                                                 "temperature": 0.7, "top_p": 0.95, "threads": 1},
                                   "max_items": 100, "ece_bins": 10, "bootstrap": 50}, "params.yaml: evaluate")
    qs, lg, ch = _world(40, 0, rng)
    calibration = qs  # the router's fit items stand in for the calibration split
    router = fit_router(records_to_table(answer_records(qs, [np.array(x) for x in lg], ch), qs, {}))
    qs, lg, ch = _world(60, 100, rng)
    m, _ = evaluate_records(answer_records(qs, [np.array(x) for x in lg], ch), qs, {}, p, 0, router=router,
                            prior_questions=calibration)
    ds = m["decision_score"]
    assert set(ds["by_family"]) == {"keyword", "count"} and ds["n"] == 60
    assert ds["prior"]["split"] == "calibration" and ds["prior"]["items"] == 40
    assert ds["brier_skill"]["ci_low"] <= ds["brier_skill"]["point"] <= ds["brier_skill"]["ci_high"]
    assert m["router"]["learned"]["n_fit"] == 40 and m["router"]["margin"]["fixable_auroc"] is not None
    bare, _ = evaluate_records(answer_records(qs, [np.array(x) for x in lg], ch), qs, {}, p, 0,
                               prior_questions=calibration)
    assert bare["router"]["learned"] is None

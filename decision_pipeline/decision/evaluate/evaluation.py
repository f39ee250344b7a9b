"""Evaluate a model's answers: per-item records, headline metrics, routing, CIs, and the paired
comparison with a baseline model's records on the same questions."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from decision_pipeline.common import stats
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.evaluate import metrics as dm
from decision_pipeline.decision.evaluate.decision_score import decision_score, fit_label_prior
from decision_pipeline.decision.evaluate.router import compare_routers
from decision_pipeline.decision.parsing import parse_with_reason, unparsed_by_reason
from decision_pipeline.questions.schema import THINK_OPEN
from decision_pipeline.decision.evaluate.config import EvaluateParams

# The split the Decision Score's label prior is fitted on: labels the evaluated model is never scored on
PRIOR_SPLIT = "calibration"




def answer_records(questions: Sequence[dict], logits: Sequence[np.ndarray], chains: Sequence[dict]) -> list[dict]:
    """One stored record per question: readout logits, thinking answer, chain and post-chain logits."""
    def rounded(x):
        return None if x is None else [round(float(v), 5) for v in x]
    return [{"id": q["id"], "family": q["family"], "level": q["level"], "task": q["task"],
             "readout_logits": rounded(lg), "thinking_pred": c["thinking_pred"],
             "chain_tokens": c["chain_tokens"], "finish_reason": c["finish_reason"], "chain": c["text"],
             "post_logits": rounded(c["post_logits"])}
            for q, lg, c in zip(questions, logits, chains)]


def records_to_table(records: Sequence[dict], questions: Sequence[dict], temps: dict) -> dict:
    """The per-item table of `records`, aligned to `questions` by id (a baseline's records may be ordered
    differently or cover other questions: a question without a record is a clear error)."""
    by_id = {r["id"]: r for r in records}
    missing = [q["id"] for q in questions if q["id"] not in by_id]
    if missing:
        raise PipelineError(f"baseline records lack question {missing[0]!r} ({len(missing)} missing); "
                            "rerun the baseline's evaluate stage on the same items")
    rows = [by_id[q["id"]] for q in questions]
    return dm.item_table(questions, [np.array(r["readout_logits"]) for r in rows],
                         [r["thinking_pred"] for r in rows], [r["chain_tokens"] for r in rows],
                         [r["finish_reason"] for r in rows],
                         [None if r["post_logits"] is None else np.array(r["post_logits"]) for r in rows],
                         temps.get("readout"), temps.get("post_chain"))


def thinking_unparsed(records: Sequence[dict], questions: Sequence[dict]) -> dict[str, int]:
    """Why thinking answers did not parse, per `parsing.UNPARSED_REASONS` (the chain is stored
    without the `<think>` its prompt opened, so it is parsed as the assistant turn it completes)."""
    by_id = {r["id"]: r for r in records}
    return unparsed_by_reason(parse_with_reason(f"{THINK_OPEN}\n{by_id[q['id']]['chain']}", len(q["options"]))[1]
                              for q in questions)


def routing_at_30(curve: list[dict]) -> dict:
    """Gap recovered when the lowest-margin 30% think, plus the plain accuracy change it is a ratio of."""
    row = next(r for r in curve if abs(r["fraction"] - 0.3) < 1e-9)
    return {"gap_recovered_at_30": dm.gap_recovered(curve, 0.3), "accuracy_at_30": row["accuracy"],
            "accuracy_change_at_30": round(row["accuracy"] - row["readout_accuracy"], 6),
            "thinking_minus_readout": round(row["thinking_accuracy"] - row["readout_accuracy"], 6)}


def evaluate_records(records: Sequence[dict], questions: Sequence[dict], temps: dict, p: EvaluateParams,
                     seed: int, baseline: tuple[str, Sequence[dict], dict] | None = None,
                     model_name: str = "model", router: dict | None = None, *,
                     prior_questions: Sequence[dict]) -> tuple[dict, dict]:
    """Metrics of one model's records and the plot data behind them.

    `baseline` is (name, records, temperatures) of the model to compare with
    (paired bootstrap on the same questions) or None; with one, `<model_name>_gate`
    says whether the model kept what it must against it. `router` is the learned router fit on the
    calibration split (`router.json`), compared with margin routing on these items. `prior_questions`
    (the `PRIOR_SPLIT` questions) fit the Decision Score's label prior. Returns (metrics, plot data).
    """
    table = records_to_table(records, questions, temps)
    raw = records_to_table(records, questions, {})
    head = dm.headline(table, p.ece_bins)
    curve = dm.routing_curve(table)
    metrics = {"n_items": len(questions), **head,
               "readout_uncalibrated": dm.headline(raw, p.ece_bins)["readout"],
               "ece_calibrated": head["readout"]["ece"], "temperatures": temps,
               "ece_change": dm.ece_change(table, raw, p.ece_bins, p.bootstrap, seed),
               "ece_noise_floor": {k: round(v, 6) for k, v in
                                   stats.ece_noise_floor(table["confidence"], p.ece_bins, 200, seed).items()},
               "by_family": {f: dm.headline(dm.subset(table, table["family"] == f), p.ece_bins)["readout"]
                             for f in sorted(set(table["family"].tolist()))},
               "routing": routing_at_30(curve),
               "unparsed_by_reason": thinking_unparsed(records, questions),
               "cis": dm.headline_cis(table, p.bootstrap, seed),
               "decision_score": decision_score(table, fit_label_prior(prior_questions), PRIOR_SPLIT,
                                                len(prior_questions), p.ece_bins, p.bootstrap, seed),
               "router": compare_routers(router, table)}
    if baseline is not None:
        name, base_records, base_temps = baseline
        base_table = records_to_table(base_records, questions, base_temps)
        metrics[f"vs_{name}"] = dm.vs_baseline(table, base_table, p.bootstrap, seed)
        metrics[f"{model_name}_gate"] = {"baseline": name, **dm.gate(metrics[f"vs_{name}"], base_table,
                                                                     p.bootstrap, seed)}
    plots = {"routing": curve, "accuracy_grid": dm.accuracy_grid(table),
             "reliability": {"calibrated": dm.reliability(table, p.ece_bins), "T=1": dm.reliability(raw, p.ece_bins)}}
    return metrics, plots

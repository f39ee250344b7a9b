"""Small builders shared by the S1MB tests (kept tiny so each test shows its own numbers)."""
from __future__ import annotations

import json
from typing import Any

from decision_pipeline.bench.s1mb import Benchmark, Decision, Prediction

NOUL = ("false", "true")


def noul(n: int, target_true: float, p_true: float | None, start: int = 0) -> list[tuple[Decision, Prediction]]:
    """``n`` noul decisions with t(true)=target_true and prediction p(true)=p_true (None = failed)."""
    out = []
    for i in range(start, start + n):
        d = Decision(f"c{i}", "q", NOUL, {"false": 1 - target_true, "true": target_true})
        p = (Prediction(f"c{i}", "q", error="RuntimeError") if p_true is None
             else Prediction(f"c{i}", "q", {"false": 1 - p_true, "true": p_true}))
        out.append((d, p))
    return out


def choice(case: str, options: str | list[str], target: dict[str, float], pred: dict[str, float] | None) -> tuple[Decision, Prediction]:
    opts = tuple(options)
    full_target = {o: target.get(o, 0.0) for o in opts}
    p = Prediction(case, "q", error="RuntimeError") if pred is None else Prediction(case, "q", {o: pred.get(o, 0.0) for o in opts})
    return Decision(case, "q", opts, full_target), p


def score(case: str, values: dict[str, float], target: dict[str, float], pred: dict[str, float] | None) -> tuple[Decision, Prediction]:
    opts = tuple(values)
    d = Decision(case, "q", opts, dict(target), tuple(float(values[o]) for o in opts))
    p = Prediction(case, "q", error="RuntimeError") if pred is None else Prediction(case, "q", dict(pred))
    return d, p


def split(pairs: list[tuple[Decision, Prediction]]) -> tuple[list[Decision], list[Prediction]]:
    return [d for d, _ in pairs], [p for _, p in pairs]


def definition(bid: str, task: str, cases: int, decisions: int, subset: str = "sample") -> Benchmark:
    metric = {"choice": "target_mass_at_prediction", "noul": "binary_brier",
              "score": "normalized_expected_score_mae"}[task]
    return Benchmark(bid, task, f"datasets/{subset}", "test", cases, decisions, metric)


def criterion(cid: str, text: Any, value: float | None = None) -> dict[str, Any]:
    return {"id": cid, "description_json": json.dumps(text), "value": value}


def decision_row(did: str, task: str, criteria: list[dict[str, Any]], instructions: Any = "Judge.") -> dict[str, Any]:
    return {"id": did, "kind": "judgment", "type": task, "system_prompt": "",
            "instructions_json": json.dumps(instructions), "criteria": criteria,
            "documents": [], "scoring": None}


def target_row(did: str, probs: dict[str, float], kind: str = "hard") -> dict[str, Any]:
    return {"decision_id": did, "kind": "judgment_distribution", "annotation_kind": kind,
            "ids": list(probs), "probabilities": list(probs.values()), "metadata_json": "{}"}


def dataset_row(case_id: str, decisions: list[dict[str, Any]], targets: list[dict[str, Any]]) -> dict[str, Any]:
    return {"case_id": case_id, "group_id": f"g-{case_id}", "language": "en", "split": "test",
            "input_hash": f"h-{case_id}", "input": {"state_json": json.dumps({"query": case_id}),
                                                    "decisions": decisions},
            "targets": targets}


def mixed_row(case_id: str, t_true: float = 1.0, label: str = "a", hi: float = 0.75) -> dict[str, Any]:
    """One row with a choice, a noul and a score question (like upstream's fixture)."""
    return dataset_row(
        case_id,
        [decision_row("label", "choice", [criterion("b", {"label": "B"}), criterion("a", "A")]),
         decision_row("relevant", "noul", [criterion("false", "No", 0), criterion("true", "Yes", 1)]),
         decision_row("quality", "score", [criterion("lo", "Low", 0), criterion("hi", ["High"], 4)])],
        [target_row("quality", {"hi": hi, "lo": 1 - hi}, "soft"),
         target_row("relevant", {"true": t_true, "false": 1 - t_true}),
         target_row("label", {"a": 1.0 if label == "a" else 0.0, "b": 0.0 if label == "a" else 1.0})],
    )

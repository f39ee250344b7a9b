"""Time S1MB scoring on a synthetic run the size of english-v1.

english-v1 has 137 benchmarks (57 choice, 59 noul, 21 score) with 26,269
judgments over 18,701 cases; a few benchmarks hold many decisions per case
and clinc-style intent sets have 151 options. This script builds such a run
in memory (rows -> cases via the real loader; predictions with soft targets,
exact ties, failures and unpredicted questions), then times, on the same data:

  * numpy:     ``score_benchmark`` for every benchmark = ``prepare_benchmark``
               (task filter, count check, target validation, baselines over D;
               reusable for every further model) + ``score_prepared``
               (prediction validation and the model metrics over R);
  * loop:      the plain per-decision loop ``reference_metrics`` (upstream's
               arithmetic; validates nothing), fed by ``benchmark_decisions``.

Every metric must agree to 1e-8. CPU times are the best of three runs.
Target: numpy total <= 1 s CPU. Run: ``.venv/bin/python benchmarks/bench_s1mb.py``.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decision_pipeline.bench.s1mb import (  # noqa: E402
    Benchmark, Prediction, benchmark_decisions, case_from_row, prepare_benchmark, reference_metrics,
    score_benchmark, score_prepared,
)

METRIC = {"choice": "target_mass_at_prediction", "noul": "binary_brier", "score": "normalized_expected_score_mae"}
INTENTS = [f"intent_{i:03d}" for i in range(151)]
LETTERS = [chr(ord("A") + i) for i in range(20)]


@dataclass
class Spec:
    """Shape of one synthetic benchmark: cases, decisions per case and option counts."""

    id: str
    task: str
    per_case: list[int]          # decisions in each case
    options: tuple[int, int]     # inclusive range of option counts
    soft: bool = False


def english_v1_specs() -> list[Spec]:
    """137 benchmarks with english-v1's per-task judgment and case totals."""
    specs = [Spec("contract-nli-choice-test-v1", "choice", [17] * 100, (3, 3)),
             Spec("ud-ewt-choice-test-v1", "choice", [15] * 91 + [16] * 9, (17, 17)),
             Spec("clinc-choice-test-v1", "choice", [1] * 151, (151, 151)),
             Spec("civil-comments-noul-test-v1", "noul", [7] * 100, (2, 2), soft=True),
             Spec("go-emotions-noul-test-v1", "noul", [28] * 100, (2, 2))]
    for i in range(54):  # 5,404 more choice judgments
        specs.append(Spec(f"choice{i:02d}-choice-test-v1", "choice", [1] * (100 + (i < 4)), (2, 20), soft=i % 5 == 0))
    for i in range(57):  # 8,857 more noul judgments
        specs.append(Spec(f"noul{i:02d}-noul-test-v1", "noul", [1] * (155 + (i < 22)), (2, 2), soft=i % 3 == 0))
    for i in range(21):  # 5,148 score judgments; 1,259 cases hold two questions
        n = 245 + (i < 3)
        doubles = 60 if i < 20 else 59
        specs.append(Spec(f"score{i:02d}-score-test-v1", "score", [2] * doubles + [1] * (n - 2 * doubles), (3, 5), soft=True))
    return specs


def distribution(rng: np.random.Generator, k: int, soft: bool) -> np.ndarray:
    if not soft:
        out = np.zeros(k)
        out[rng.integers(k)] = 1.0
        return out
    return rng.dirichlet(np.full(k, 0.5))


def prediction_probs(rng: np.random.Generator, target: np.ndarray) -> np.ndarray:
    """A noisy guess near the target; a third are rounded (exact ties, sums off by < 1e-5)."""
    p = 0.6 * target + 0.4 * rng.dirichlet(np.ones(len(target)))
    if rng.random() < 0.33:
        p = np.round(p, 2)
        p[np.argmax(p)] += 1.0 - p.sum()
        p[np.argmin(p)] += 3e-6
    return p


def build(spec: Spec, rng: np.random.Generator) -> tuple[Benchmark, list, list[Prediction]]:
    """Raw dataset rows -> cases (the real loader) plus one prediction per question."""
    rows, predictions = [], []
    for c, count in enumerate(spec.per_case):
        case_id = f"{spec.id[:12]}-{c:04d}"
        decisions, targets = [], []
        for q in range(count):
            k = int(rng.integers(spec.options[0], spec.options[1] + 1))
            ids = (["false", "true"] if spec.task == "noul" else INTENTS if k == 151
                   else [f"s{v}" for v in range(k)] if spec.task == "score" else LETTERS[:k])
            values = [float(v) for v in range(1, k + 1)] if spec.task == "score" else [None] * k
            decisions.append({"id": f"q{q}", "kind": "judgment", "type": spec.task, "system_prompt": "",
                              "instructions_json": json.dumps("Judge the input."),
                              "criteria": [{"id": o, "description_json": json.dumps(o), "value": v}
                                           for o, v in zip(ids, values)],
                              "documents": [], "scoring": None})
            target = distribution(rng, k, spec.soft)
            targets.append({"decision_id": f"q{q}", "kind": "judgment_distribution",
                            "annotation_kind": "soft" if spec.soft else "hard", "ids": ids,
                            "probabilities": target.tolist(), "metadata_json": "{}"})
            roll = rng.random()
            if roll < 0.03:
                predictions.append(Prediction(case_id, f"q{q}", error="TimeoutError"))
            elif roll > 0.01 + 0.03:
                predictions.append(Prediction(case_id, f"q{q}", dict(zip(ids, prediction_probs(rng, target).tolist()))))
        rows.append({"case_id": case_id, "group_id": case_id, "language": "en", "split": "test",
                     "input_hash": f"sha-{case_id}", "targets": targets,
                     "input": {"state_json": json.dumps({"query": case_id}), "decisions": decisions}})
    cases = [case_from_row(r) for r in rows]
    definition = Benchmark(spec.id, spec.task, f"datasets/{spec.id[:-8]}", "test", len(cases),
                           sum(spec.per_case), METRIC[spec.task])
    return definition, cases, predictions


def agree(fast: dict, slow: dict) -> bool:
    if list(fast) != list(slow):
        return False
    return all((a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=0, abs_tol=1e-8))
               for a, b in zip(fast.values(), slow.values()))


def best_cpu(func, repeats: int = 3) -> tuple[float, object]:
    """Smallest CPU time of ``repeats`` calls, and the last result."""
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.process_time()
        result = func()
        best = min(best, time.process_time() - start)
    return best, result


def main() -> None:
    rng = np.random.default_rng(20250101)
    start = time.perf_counter()
    run = [build(spec, rng) for spec in english_v1_specs()]
    load_s = time.perf_counter() - start
    judgments = sum(d.decision_count for d, _, _ in run)
    cases = sum(d.case_count for d, _, _ in run)
    counts = {t: sum(d.task == t for d, _, _ in run) for t in ("choice", "noul", "score")}
    assert (len(run), judgments, cases) == (137, 26_269, 18_701), (len(run), judgments, cases)
    assert counts == {"choice": 57, "noul": 59, "score": 21}, counts

    table = {t: dict(n=counts[t], judgments=0, prepare=0.0, score=0.0, total=0.0, loop=0.0) for t in counts}
    mismatches = []
    for definition, case_list, predictions in run:
        row = table[definition.task]
        row["judgments"] += definition.decision_count
        total, fast = best_cpu(lambda: score_benchmark(definition, case_list, predictions))
        prep_s, prepared = best_cpu(lambda: prepare_benchmark(definition, case_list))
        score_s, again = best_cpu(lambda: score_prepared(prepared, predictions))
        loop_s, slow = best_cpu(lambda: reference_metrics(
            definition.task, benchmark_decisions(definition, case_list), predictions))
        row["total"] += total
        row["prepare"] += prep_s
        row["score"] += score_s
        row["loop"] += loop_s
        if not (agree(fast, slow) and again == fast):
            mismatches.append(definition.id)
    table["total"] = {k: sum(r[k] for r in list(table.values())) for k in table["choice"]}

    print(f"S1MB scoring, synthetic english-v1: {len(run)} benchmarks, {judgments:,} judgments, "
          f"{cases:,} cases (built + loaded in {load_s:.2f} s)")
    print(f"{'':8}{'':11}{'':10}{'---------- numpy, CPU s ----------':>36}{'loop':>9}{'loop / numpy':>16}")
    print(f"{'task':<8}{'benchmarks':>11}{'judgments':>10}{'prepare':>12}{'score':>12}{'total':>12}"
          f"{'CPU s':>9}{'total':>8}{'score':>8}")
    for task, r in table.items():
        print(f"{task:<8}{r['n']:>11}{r['judgments']:>10,}{r['prepare']:>12.3f}{r['score']:>12.3f}"
              f"{r['total']:>12.3f}{r['loop']:>9.3f}{r['loop'] / r['total']:>7.2f}x{r['loop'] / r['score']:>7.2f}x")
    print("prepare = task filter, count check, target validation, baselines (once per benchmark);")
    print("score = prediction validation + model metrics (per model); total = score_benchmark end to end.")
    assert not mismatches, f"metrics differ by more than 1e-8 in {mismatches}"
    print("all metrics of all 137 benchmarks agree with the loop to 1e-8")
    total = table["total"]["total"]
    assert total <= 1.0, f"scoring took {total:.3f} s CPU, above the 1 s target"
    print(f"target met: {total:.3f} s CPU <= 1 s")


if __name__ == "__main__":
    main()

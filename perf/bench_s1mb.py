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

Every metric must agree to 1e-8. CPU times are the best of three interleaved
runs (each repeat times all four calls of a benchmark in turn).
Target: numpy total <= 1 s CPU.

Then the command line on the same run written as a judgments file (one JSON line
per judgment, null for failed and unpredicted questions), each a fresh process,
``--repeats`` interleaved rounds, median (and best) wall and CPU seconds:

  * cli:        ``python -m decision_pipeline s1mb metrics FILE`` (the fast
                column-wise pass; the strict pass runs only on bad input);
  * cli-strict: the same command with the strict per-line pass only (the code
                before the fast pass; still what words every error);
  * parse-only: ``json.loads`` of every line of the same file, nothing else;
  * import:     ``import decision_pipeline.bench.s1mb.cli`` (interpreter + numpy).

Ratios (cli / parse-only; cli-strict / cli) are taken within each round, then the
median over rounds, on wall and on CPU time (CPU is steadier on a loaded machine). The output
must equal the in-memory ``score_benchmark`` metrics to 1e-8, and both passes must
give the same result. Run: ``.venv/bin/python perf/bench_s1mb.py [--repeats 5]``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decision_pipeline.bench.s1mb import (  # noqa: E402
    Benchmark, Prediction, benchmark_decisions, case_from_row, prepare_benchmark, reference_metrics,
    score_benchmark, score_prepared,
)
from decision_pipeline.bench.s1mb.cli import _metrics_fast, _metrics_strict  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

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


def best_cpu_interleaved(funcs: dict, repeats: int = 3) -> dict[str, tuple[float, object]]:
    """Per function: smallest CPU time over ``repeats`` rounds (each round calls every function once), last result."""
    best = dict.fromkeys(funcs, math.inf)
    results: dict[str, object] = {}
    for _ in range(repeats):
        for name, func in funcs.items():
            start = time.process_time()
            results[name] = func()
            best[name] = min(best[name], time.process_time() - start)
    return {name: (best[name], results[name]) for name in funcs}


def write_judgments(run: list, path: Path) -> int:
    """The run as a ``metrics`` judgments file: one line per decision of D, in case order."""
    n = 0
    with path.open("w", encoding="utf-8") as out:
        for definition, case_list, predictions in run:
            answers = {(p.case_id, p.question_id): p.probabilities for p in predictions}
            for d in benchmark_decisions(definition, case_list):
                options = ([{"id": o, "value": v} for o, v in zip(d.options, d.values)] if d.values is not None
                           else [{"id": o} for o in d.options])
                out.write(json.dumps({"benchmark": definition.id, "task": definition.task, "case_id": d.case_id,
                                      "question_id": d.question_id, "options": options, "target": dict(d.target),
                                      "prediction": answers.get((d.case_id, d.question_id))}) + "\n")
                n += 1
    return n


PARSE_ONLY = ("import json, sys\n"
              "with open(sys.argv[1], encoding='utf-8') as stream:\n"
              "    for line in stream:\n"
              "        if line.strip():\n"
              "            json.loads(line)\n")
CLI_STRICT = ("import sys\n"
              "from decision_pipeline.bench.s1mb.cli import _metrics_strict\n"
              "from decision_pipeline.bench.s1mb.jsonio import dumps_strict\n"
              "sys.stdout.write(dumps_strict(_metrics_strict(sys.argv[1])))\n")


def timed_process(argv: list[str]) -> tuple[float, float, str]:
    """Wall and CPU (user + sys of the child) seconds of one fresh process, and its stdout."""
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} exited {done.returncode}: {done.stderr.strip()}")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system), done.stdout


def time_cli(run: list, expected: dict[str, dict], repeats: int) -> None:
    """The command line vs parse-only on one judgments file: fresh processes, interleaved rounds."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "judgments.jsonl"
        lines = write_judgments(run, path)
        mib = path.stat().st_size / 2**20
        commands = {
            "cli": [sys.executable, "-m", "decision_pipeline", "s1mb", "metrics", str(path)],
            "cli-strict": [sys.executable, "-c", CLI_STRICT, str(path)],
            "parse-only": [sys.executable, "-c", PARSE_ONLY, str(path)],
            "import": [sys.executable, "-c", "import decision_pipeline.bench.s1mb.cli"],
        }
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
        outputs: dict[str, str] = {}
        for _ in range(repeats):
            for name, argv in commands.items():
                wall, cpu, outputs[name] = timed_process(argv)
                times[name].append((wall, cpu))
        fast, strict = _metrics_fast(path), _metrics_strict(path)
    assert fast == strict, "the fast and the strict pass disagree"
    got = json.loads(outputs["cli"])
    assert got == json.loads(outputs["cli-strict"]) == json.loads(json.dumps(fast))
    assert list(got) == list(expected) and all(agree(got[b], expected[b]) for b in expected), \
        "CLI metrics differ from score_benchmark by more than 1e-8"
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
    best = {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in times.items()}
    print(f"\nCLI `metrics` on the same run as one file: {lines:,} lines, {mib:.1f} MiB "
          f"(fresh process each; {repeats} interleaved rounds)")
    print(f"{'':12}{'median wall s':>15}{'CPU s':>8}{'best wall s':>13}{'CPU s':>8}")
    for name in commands:
        print(f"{name:<12}{med[name][0]:>15.3f}{med[name][1]:>8.3f}{best[name][0]:>13.3f}{best[name][1]:>8.3f}")

    def ratio(num: str, den: str, i: int) -> float:  # per round (seconds apart, same load), then the median
        return statistics.median(a[i] / b[i] for a, b in zip(times[num], times[den]))

    print("ratios (median over rounds of the ratio within a round):")
    for num, den, what in (("cli", "parse-only", "CLI vs parse-only"),
                           ("cli-strict", "parse-only", "strict per-line CLI (before) vs parse-only"),
                           ("cli-strict", "cli", "speed-up of the fast pass (before / after)")):
        print(f"  {num} / {den}: {ratio(num, den, 0):.2f}x wall, {ratio(num, den, 1):.2f}x CPU   ({what})")
    print("CLI output equals score_benchmark to 1e-8; fast and strict passes agree exactly")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="interleaved rounds of the CLI timings")
    args = ap.parse_args()
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
    mismatches, expected = [], {}
    for definition, case_list, predictions in run:
        row = table[definition.task]
        row["judgments"] += definition.decision_count
        prepared = prepare_benchmark(definition, case_list)
        timed = best_cpu_interleaved({
            "total": lambda: score_benchmark(definition, case_list, predictions),
            "prepare": lambda: prepare_benchmark(definition, case_list),
            "score": lambda: score_prepared(prepared, predictions),
            "loop": lambda: reference_metrics(definition.task, benchmark_decisions(definition, case_list), predictions),
        })
        (total, fast), (prep_s, _), (score_s, again), (loop_s, slow) = timed.values()
        expected[definition.id] = fast
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
    time_cli(run, expected, args.repeats)


if __name__ == "__main__":
    main()

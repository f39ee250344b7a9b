"""S1MB (System One Mosaic Benchmark) scoring, reproduced from the upstream evaluator.

Spec: ``docs/S1MB_SCORING.md`` (the §N cited throughout). Numbers match
upstream to 1e-8; no formula is "improved". Everything is plain data in, plain
data out; every bad input raises ``S1MBError`` (a ``PipelineError``) with a
one-line message naming the benchmark, case and question.

Typical pipeline use::

    from decision_pipeline.bench import s1mb

    defs = s1mb.load_benchmarks("data/s1mb/benchmarks")           # {id: Benchmark}
    cases = s1mb.load_cases("data/s1mb", defs["arc-choice-test-v1"])
    metrics = s1mb.score_benchmark(defs["arc-choice-test-v1"], cases, predictions)
    result = s1mb.build_result(defs["arc-choice-test-v1"], cases, predictions,
                               run_id="sft", model={"id": "m", "adapter": "hf", "revision": "r"})
    s1mb.write_result("out/arc-choice-test-v1.json.xz", result)

    published = s1mb.cohort_scores(s1mb.load_results_dir("hub-results"), defs)
    published["me"] = {r["benchmark"]["id"]: s1mb.summarize_result(r) for r in my_results}
    category = s1mb.category_tasks(english_v1.benchmarks, defs)   # {id: task}
    board = s1mb.leaderboard(published, category)                 # task_avg, task_scores, borda

Public API
----------
Definitions (§2)
    ``Benchmark``, ``Category``; ``parse_benchmark(obj, name=None)``,
    ``load_benchmark(path)``, ``load_benchmarks(directory) -> {id: Benchmark}``,
    ``dump_benchmark(b) -> str``, ``parse_category(obj, definitions=None)``,
    ``load_category(path, definitions=None)``,
    ``generalization_subset(ids, definitions) -> list[str]``.
Dataset (§3.1-3.2)
    ``read_rows(directory, split="test")`` (Parquet / JSONL / Arrow files),
    ``case_from_row(row) -> Case``, ``cases_for_benchmark(definition, cases)``
    (task filter + case/decision count check), ``benchmark_decisions(definition, cases)``,
    ``load_cases(data_root, definition)``.
Metrics (§4-5)
    ``score_benchmark(definition, cases, predictions) -> {metric: float | None}``,
    ``score_decisions(task, decisions, predictions, benchmark_id=None)``;
    to score several models on one benchmark, pay for D once:
    ``prepare_benchmark(definition, cases) -> PreparedBenchmark`` (or
    ``prepare(task, decisions)``) then ``score_prepared(prepared, predictions)``;
    ``adjusted_score(skill)``; ``reference_metrics(task, decisions, predictions)``
    is the slow per-decision transcription used as an oracle. ``METRIC_KEYS[task]``
    lists the exact keys.
Aggregation (§5-7, 0-1 scale)
    ``BenchmarkScore(task, adjusted, eligible=True, complete=True, demo=False)``,
    ``eligible(task, metrics)``, ``category_tasks(ids, definitions)``,
    ``task_scores(scores, category) -> {noul, choice, score}``,
    ``task_avg(task_scores)``, ``borda(models, category) -> {model: float | None}``,
    ``leaderboard(models, category)``, ``display(x) -> "12.34" | "N/A"``.
Result files (§3.4)
    ``build_result(definition, cases, predictions, *, run_id, model, ..., machine=True) -> dict``
    (``machine=False`` leaves python/platform out: byte-identical results on every machine),
    ``machine_environment()``,
    ``check_result(result)`` (schema), ``verify_result(result, cases, definition=None)``
    (recompute to 1e-8), ``summarize_result(result, definition=None) -> BenchmarkScore``
    (viewer consistency check + eligibility), ``read_result(path)``,
    ``write_result(path, result)``, ``ModelFolder``, ``parse_metadata(obj)``,
    ``load_model_folder(path)``, ``load_results_dir(path) -> {model_id: ModelFolder}``,
    ``write_model_folder(root, metadata, results)``,
    ``cohort_scores(folders, definitions) -> {model: {benchmark: BenchmarkScore}}``.
Strict JSON
    ``read_json(path)``, ``write_json(path, value)``, ``loads_strict(text)``:
    NaN/Infinity and duplicate keys rejected; ``.json.xz`` compressed; 64 MiB cap.
Command line
    ``python -m decision_pipeline s1mb metrics FILE.jsonl`` and ``... aggregate FILE.json``.
"""
from .aggregate import (
    BenchmarkScore, borda, category_tasks, display, eligible, leaderboard, task_avg, task_scores,
)
from .dataset import benchmark_decisions, case_from_row, cases_for_benchmark, load_cases, read_rows
from .definitions import (
    EPSILON, METRIC_KEYS, PRIMARY_METRIC, TASKS, Benchmark, Category, dump_benchmark,
    generalization_subset, load_benchmark, load_benchmarks, load_category, parse_benchmark,
    parse_category,
)
from .errors import S1MBError
from .folders import (
    ModelFolder, cohort_scores, load_model_folder, load_results_dir, parse_metadata, write_model_folder,
)
from .jsonio import loads_strict, read_json, write_json
from .metrics import (
    PreparedBenchmark, adjusted_score, prepare, prepare_benchmark, score_benchmark, score_decisions,
    score_prepared,
)
from .records import (
    Case, Decision, Option, Prediction, Question, Target, check_probabilities, parse_prediction,
)
from .reference import reference_metrics
from .results import (
    EVALUATOR_VERSION, build_result, check_result, machine_environment, read_result, summarize_result,
    verify_result, write_result,
)

__all__ = [
    "BenchmarkScore", "borda", "category_tasks", "display", "eligible", "leaderboard", "task_avg",
    "task_scores", "benchmark_decisions", "case_from_row", "cases_for_benchmark", "load_cases",
    "read_rows", "EPSILON", "METRIC_KEYS", "PRIMARY_METRIC", "TASKS", "Benchmark", "Category",
    "dump_benchmark", "generalization_subset", "load_benchmark", "load_benchmarks", "load_category",
    "parse_benchmark", "parse_category", "S1MBError", "ModelFolder", "cohort_scores",
    "load_model_folder", "load_results_dir", "parse_metadata", "write_model_folder", "loads_strict",
    "read_json", "write_json", "adjusted_score", "score_benchmark", "score_decisions", "Case",
    "PreparedBenchmark", "prepare", "prepare_benchmark", "score_prepared",
    "Decision", "Option", "Prediction", "Question", "Target", "check_probabilities",
    "parse_prediction", "reference_metrics", "EVALUATOR_VERSION", "build_result", "check_result",
    "machine_environment", "read_result", "summarize_result", "verify_result", "write_result",
]

"""Score one pipeline model on the S1MB set (stage `s1mb@{model}`).

Answers every benchmark of the indexed category with the pipeline's calibrated
readout (``decision_pipeline.bench.adapter``) and, from the same readout, with
the lowest-margin ``route_fraction`` of questions answered by thinking. Each
variant gets one re-verified upstream result per benchmark (its own model
folder), task scores and Task Avg and, against a cohort of published model
folders, Borda points and the competition rank.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from decision_pipeline.bench import adapter
from decision_pipeline.bench.cohort import check_complete, reference_scores
from decision_pipeline.bench.noise import Scored, task_cis
from decision_pipeline.bench.data import load_index
from decision_pipeline.bench.s1mb import (
    TASKS, Benchmark, BenchmarkScore, Case, Prediction, borda, build_result, category_tasks, cohort_scores,
    benchmark_decisions, load_benchmarks, load_cases, load_category, load_results_dir, summarize_result, task_avg, task_scores,
    verify_result,
)
from decision_pipeline.bench.synthetic import slug
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.fingerprint import model_fingerprint
from decision_pipeline.common.log import info

ORG = "pipeline"
ROUTED_SUFFIX = "-routed"


@dataclass
class Folder:
    """One published-style model folder: its metadata and one result per benchmark."""
    metadata: dict
    results: list[dict]


@dataclass
class ModelScore:
    """What the stage writes: the readout-only and the routed model folder, and the metrics of both."""
    readout: Folder
    routed: Folder
    metrics: dict


# Result files are DVC outputs: a wall-clock stamp or duration in them would change their bytes (and
# dvc.lock) on every run, and a kernel or Python version on every other machine. The time is in the stage's
# summary line and, with the machine, in its run-local timings file; `elapsed_seconds` 0 = not recorded.
REPRODUCIBLE_CREATED_AT = "2026-01-01T00:00:00+00:00"


def model_revision(model_dir: str | Path) -> str:
    """The result files' model revision: the shared weights fingerprint, shortened."""
    return "sha256:" + model_fingerprint(model_dir)[:16]


def competition_rank(points: dict[str, float | None], name: str) -> int | None:
    """1 + the number of models with strictly more points (ties share a rank); None if unranked."""
    mine = points.get(name)
    if mine is None:
        return None
    return 1 + sum(1 for other, v in points.items() if other != name and v is not None and v > mine)


def _metadata(model_info: dict, short_name: str, display_name: str) -> dict:
    """A model folder's metadata.json (the display name says which variant it is)."""
    return {"model_id": model_info["id"], "display_name": display_name, "short_name": short_name,
            "total_params": model_info["total_params"]}


def _result(definition: Benchmark, cases: list[Case], predictions: list[Prediction], model_info: dict,
            settings: dict, seconds: float, source: dict) -> dict:
    """One upstream result, re-verified by recomputing every stored metric (to 1e-8)."""
    result = build_result(definition, cases, predictions, run_id=model_info["id"].replace("__", "-", 1),
                          model={**model_info, "settings": settings}, elapsed_seconds=0.0,
                          created_at=REPRODUCIBLE_CREATED_AT, environment={"dataset_source": dict(source)},
                          machine=False)
    verify_result(result, cases, definition)
    return result


def _scores(results: list[dict], definitions: Mapping[str, Benchmark],
            tasks: Mapping[str, str]) -> tuple[dict[str, BenchmarkScore], dict[str, float | None], float | None]:
    """Per-benchmark summaries, task scores and Task Avg of one variant's results."""
    mine = {r["benchmark"]["id"]: summarize_result(r, definitions[r["benchmark"]["id"]]) for r in results}
    per_task = task_scores(mine, tasks)
    return mine, per_task, task_avg(per_task)


def _ranked(cohort: dict[str, dict[str, BenchmarkScore]], model_id: str, mine: dict[str, BenchmarkScore],
            tasks: Mapping[str, str], stage: str) -> dict[str, Any]:
    """Borda points, rank and cohort size of one variant added alone to the cohort (variants never rank each other)."""
    if model_id in cohort:
        info(stage, f"cohort already holds {model_id}; this run replaces it")
    points = borda({**cohort, model_id: mine}, tasks)
    return {"borda": points[model_id], "rank": competition_rank(points, model_id),
            "cohort_size": sum(v is not None for v in points.values())}


def _load_cohort(cohort_dir: str, definitions: Mapping[str, Benchmark], benchmarks: Sequence[str]) -> dict:
    """The configured cohort's per-benchmark scores ({} when none is configured); a model missing a benchmark is refused."""
    if not cohort_dir:
        return {}
    cohort_path = Path(cohort_dir)
    if not cohort_path.is_dir():
        raise PipelineError(f"{cohort_path}: cohort directory not found; fix s1mb.cohort_dir in params.yaml")
    folders = load_results_dir(cohort_path)
    check_complete(cohort_path, {n: f.results for n, f in folders.items()}, benchmarks)
    return cohort_scores(folders, definitions)


@dataclass
class _Answered:
    """Both variants' results over the category, and the adapter's counts summed over benchmarks."""
    readout: list[dict]
    routed: list[dict]
    counts: dict[str, int]
    scored: list[tuple[Scored, Scored]]  # (readout, routed) per benchmark, for the item-bootstrap CIs


def _answer_all(stage: str, benchmarks: Sequence[str], definitions: Mapping[str, Benchmark], data_root: Path,
                source: dict, infos: tuple[dict, dict],
                answer: Callable[[Sequence[Case]], adapter.Predicted]) -> _Answered:
    """Both variants of every benchmark; `answer` is ``adapter.predict_cases`` bound to the model and params."""
    readout_info, routed_info = infos
    out = _Answered([], [], {"chunked_questions": 0, "routed_questions": 0, "routed_parsed": 0,
                                   "routed_post_chain": 0, "routed_one_hot_fallback": 0}, [])
    for bid in benchmarks:
        definition = definitions[bid]
        cases = load_cases(data_root, definition)
        got = answer(cases)
        decisions = benchmark_decisions(definition, cases)
        out.scored.append((Scored(bid, definition.task, decisions, list(got.readout)),
                           Scored(bid, definition.task, decisions, list(got.routed))))
        out.readout.append(_result(definition, cases, got.readout, readout_info, got.settings,
                                   got.readout_seconds, source))
        out.routed.append(_result(definition, cases, got.routed, routed_info, got.routed_settings,
                                  got.readout_seconds + got.routing_seconds, source))
        out.counts["chunked_questions"] += got.settings["many_options"]["chunked_questions"]
        out.counts["routed_questions"] += got.routed_settings["routing"].get("routed", 0)
        out.counts["routed_parsed"] += got.routed_settings["routing"].get("parsed", 0)
        out.counts["routed_post_chain"] += got.routed_settings["routing"].get("post_chain", 0)
        out.counts["routed_one_hot_fallback"] += got.routed_settings["routing"].get("one_hot_fallback", 0)
        info(stage, f"{bid}: adjusted {out.readout[-1]['metrics']['baseline_adjusted_score']} readout, "
                    f"{out.routed[-1]['metrics']['baseline_adjusted_score']} routed")
    return out


def score_model(name: str, model_dir: str | Path, data_dir: str | Path, p: adapter.S1mbParams,
                temperatures: Mapping[str, float], seed: int,
                post_temperatures: Mapping[str, float] | None = None) -> ModelScore:
    """Answer every benchmark of the set in `data_dir` with the model in `model_dir` (called `name`).

    `temperatures` are the model's calibrated per-task readout temperatures
    (``adapter.load_readout_temperatures``). Readout-only and routed scores
    come from the same readout: routing re-answers only the routed questions.
    """
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.model import count_params, load_model

    stage = f"s1mb@{name}"
    data_dir = Path(data_dir)
    index, data_root = load_index(data_dir)
    definitions = load_benchmarks(data_dir / "benchmarks")
    category = load_category(data_dir / "categories" / f"{index['category']}.json", definitions)
    cohort = _load_cohort(p.cohort_dir, definitions, category.benchmarks)
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    answer = partial(adapter.predict_cases, read=adapter.model_reader(model, tok, temperatures, p.batch_size),
                     config=p, seed=seed, temperatures=temperatures, model=model, tok=tok,
                     post_temperatures=post_temperatures, model_dir=str(model_dir))
    base_info = {"adapter": adapter.ADAPTER_NAME, "revision": model_revision(model_dir),
                 "total_params": count_params(model)}
    infos = ({"id": f"{ORG}__{slug(name)}", **base_info}, {"id": f"{ORG}__{slug(name)}{ROUTED_SUFFIX}", **base_info})
    got = _answer_all(stage, category.benchmarks, definitions, data_root, index["dataset_source"], infos, answer)

    tasks = category_tasks(category.benchmarks, definitions)
    mine, per_task, avg = _scores(got.readout, definitions, tasks)
    mine_routed, per_task_routed, avg_routed = _scores(got.routed, definitions, tasks)
    metrics = {"category": category.id, "temperatures": {t: float(temperatures.get(t, 1.0)) for t in TASKS},
               "task_avg": avg, "task_scores": per_task, "route_fraction": p.route_fraction,
               "task_avg_routed": avg_routed, "task_scores_routed": per_task_routed,
               "n_benchmarks": len(got.readout),
               "n_judgments": sum(r["benchmark"]["decision_count"] for r in got.readout), **got.counts,
               "cis": task_cis([r for r, _ in got.scored], tasks, per_task, p.bootstrap, seed),
               "cis_routed": task_cis([r for _, r in got.scored], tasks, per_task_routed, p.bootstrap, seed)}
    cohort = {**reference_scores([r for r, _ in got.scored]), **cohort}  # the reference scorers rank in every run
    metrics["cohort"] = sorted(cohort)
    if cohort:
        metrics.update(_ranked(cohort, infos[0]["id"], mine, tasks, stage))
        routed_rank = _ranked(cohort, infos[1]["id"], mine_routed, tasks, stage)
        metrics.update(borda_routed=routed_rank["borda"], rank_routed=routed_rank["rank"])
    return ModelScore(Folder(_metadata(infos[0], name, f"{name} (pipeline)"), got.readout),
                      Folder(_metadata(infos[1], f"{name}{ROUTED_SUFFIX}",
                                       f"{name} (pipeline, {p.route_fraction:g} routed to thinking)"), got.routed),
                      metrics)

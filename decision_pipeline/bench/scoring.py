"""Score one pipeline model on the S1MB set (stage `s1mb@{model}`).

Answers every benchmark of the indexed category with the pipeline's readout
(``decision_pipeline.bench.adapter``), builds and re-verifies one upstream
result per benchmark, and computes task scores, Task Avg and, against a cohort
of published model folders, Borda points and the competition rank.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from decision_pipeline.bench import adapter
from decision_pipeline.bench.data import load_index
from decision_pipeline.bench.s1mb import (
    borda, build_result, category_tasks, cohort_scores, load_benchmarks, load_cases, load_category,
    load_results_dir, summarize_result, task_avg, task_scores, verify_result,
)
from decision_pipeline.bench.synthetic import slug
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.fingerprint import model_fingerprint
from decision_pipeline.common.log import info

ORG = "pipeline"


@dataclass
class ModelScore:
    """What the stage writes: the model folder's metadata and results, and the metrics."""
    metadata: dict
    results: list[dict]
    metrics: dict


def model_revision(model_dir: str | Path) -> str:
    """The result files' model revision: the shared weights fingerprint, shortened."""
    return "sha256:" + model_fingerprint(model_dir)[:16]


def competition_rank(points: dict[str, float | None], name: str) -> int | None:
    """1 + the number of models with strictly more points (ties share a rank); None if unranked."""
    mine = points.get(name)
    if mine is None:
        return None
    return 1 + sum(1 for other, v in points.items() if other != name and v is not None and v > mine)


def score_model(name: str, model_dir: str | Path, data_dir: str | Path, p: adapter.S1mbParams,
                seed: int) -> ModelScore:
    """Answer every benchmark of the set in `data_dir` with the model in `model_dir` (called `name`)."""
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.model import count_params, load_model

    stage = f"s1mb@{name}"
    data_dir = Path(data_dir)
    index, data_root = load_index(data_dir)
    definitions = load_benchmarks(data_dir / "benchmarks")
    category = load_category(data_dir / "categories" / f"{index['category']}.json", definitions)
    cohort = None
    if p.cohort_dir:
        cohort_path = Path(p.cohort_dir)
        if not cohort_path.is_dir():
            raise PipelineError(f"{cohort_path}: cohort directory not found; fix s1mb.cohort_dir in params.yaml")
        cohort = cohort_scores(load_results_dir(cohort_path), definitions)
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    read = adapter.model_reader(model, tok, p.temperatures, p.batch_size)
    model_id = f"{ORG}__{slug(name)}"
    model_info = {"id": model_id, "adapter": adapter.ADAPTER_NAME, "revision": model_revision(model_dir),
                  "total_params": count_params(model)}

    results, chunked, routed = [], 0, 0
    for bid in category.benchmarks:
        definition = definitions[bid]
        t0 = time.time()
        cases = load_cases(data_root, definition)
        predictions, settings = adapter.predict_cases(cases, read, p, seed, model, tok)
        result = build_result(definition, cases, predictions, run_id=f"{ORG}-{slug(name)}",
                              model={**model_info, "settings": settings}, elapsed_seconds=round(time.time() - t0, 3),
                              environment={"dataset_source": dict(index["dataset_source"])})
        verify_result(result, cases, definition)  # recompute every stored metric to 1e-8
        results.append(result)
        chunked += settings["many_options"]["chunked_questions"]
        routed += settings["routing"].get("routed", 0)
        info(stage, f"{bid}: adjusted {result['metrics']['baseline_adjusted_score']}")

    metadata = {"model_id": model_id, "display_name": f"{name} (pipeline)", "short_name": name,
                "total_params": model_info["total_params"]}
    mine = {r["benchmark"]["id"]: summarize_result(r, definitions[r["benchmark"]["id"]]) for r in results}
    tasks = category_tasks(category.benchmarks, definitions)
    per_task = task_scores(mine, tasks)
    metrics = {"category": category.id, "task_avg": task_avg(per_task), "task_scores": per_task,
               "n_benchmarks": len(results), "n_judgments": sum(r["benchmark"]["decision_count"] for r in results),
               "chunked_questions": chunked, "routed_questions": routed}
    if cohort is not None:
        if model_id in cohort:
            info(stage, f"cohort already holds {model_id}; this run replaces it")
        cohort[model_id] = mine
        points = borda(cohort, tasks)
        metrics.update(borda=points[model_id], rank=competition_rank(points, model_id),
                       cohort_size=sum(v is not None for v in points.values()))
    return ModelScore(metadata, results, metrics)

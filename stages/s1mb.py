"""Stage `s1mb@{model}`: S1MB results, task scores, Task Avg and Borda for models/<model>.

Reads the benchmark set indexed by `s1mb_data` (data/s1mb/bench), answers every
benchmark of its category with the pipeline's readout (``decision_pipeline.bench.adapter``:
per-task temperatures, chunked readout above 8 options, optional routed
thinking), and writes

- ``data/s1mb/<model>/pipeline__<model>/``: a published-style model folder
  (``metadata.json`` + one upstream result ``<benchmark-id>.json.xz`` each,
  every one re-verified by recomputing its metrics); copy it into a cohort
  directory to rank later models against it;
- ``metrics/s1mb/<model>.json``: ``task_avg``, ``task_scores.{noul,choice,score}``
  (0-1, null where the spec says null), ``n_benchmarks``, ``n_judgments``, and
  with ``s1mb.cohort_dir`` (a directory of published model folders) ``borda``
  and competition ``rank`` among the cohort plus this model.
"""
from __future__ import annotations

import argparse
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from decision_pipeline.bench import adapter
from decision_pipeline.bench.s1mb import (
    borda, category_tasks, cohort_scores, build_result, load_benchmarks, load_cases, load_category,
    load_results_dir, summarize_result, task_avg, task_scores, verify_result, write_model_folder,
)
from decision_pipeline.bench.synthetic import slug
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import atomic_dir, write_json
from decision_pipeline.common.log import info, stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from stages.s1mb_data import load_index

ORG = "pipeline"


@dataclass
class TaskTemperatures:
    """Readout softmax temperature per task type (adapter-side, recorded in model.settings)."""
    noul: float = rule(min=0.01, default=1.0)
    choice: float = rule(min=0.01, default=1.0)
    score: float = rule(min=0.01, default=1.0)


@dataclass
class S1mbParams:
    batch_size: int = rule(min=1)
    temperatures: TaskTemperatures = field(default_factory=TaskTemperatures)
    route_fraction: float = rule(min=0.0, max=1.0, default=0.0, doc="lowest-margin share answered by thinking")
    route_eps: float = rule(min=0.0, max=0.5, default=0.01, doc="mass spread off the thinking answer")
    max_new_tokens: int = rule(min=1, default=96)
    cohort_dir: str = ""         # directory of published model folders for Borda/rank; '' = none
    threads: int = rule(min=1, default=2)


def model_revision(model_dir: Path) -> str:
    """SHA-256 over config.json and the weight files (names and bytes), shortened."""
    h = hashlib.sha256()
    files = [model_dir / "config.json"] + sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin"))
    for path in files:
        if path.is_file():
            h.update(path.name.encode() + b"\0")
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return "sha256:" + h.hexdigest()[:16]


def competition_rank(points: dict[str, float | None], name: str) -> int | None:
    """1 + the number of models with strictly more points (ties share a rank); None if unranked."""
    mine = points.get(name)
    if mine is None:
        return None
    return 1 + sum(1 for other, v in points.items() if other != name and v is not None and v > mine)


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="model name: models/<name> is scored")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data/s1mb/bench", help="the s1mb_data output")
    ap.add_argument("--model-dir", default=None, help="default models/<model>")
    ap.add_argument("--out", default=None, help="default data/s1mb/<model>")
    ap.add_argument("--metrics", default=None, help="default metrics/s1mb/<model>.json")
    args = ap.parse_args(argv)
    started = time.time()
    stage = f"s1mb@{args.model}"
    p = load_section(S1mbParams, "s1mb", args.params)
    seed = load_base(args.params).seed
    model_dir = Path(args.model_dir or f"models/{args.model}")
    out = Path(args.out or f"data/s1mb/{args.model}")
    metrics_path = args.metrics or f"metrics/s1mb/{args.model}.json"
    if out.resolve() == Path(args.data).resolve():
        raise PipelineError(f"{stage}: --out {out} would overwrite the benchmark set; choose another model name")
    torch.set_num_threads(p.threads)

    index, data_root = load_index(args.data)
    definitions = load_benchmarks(Path(args.data) / "benchmarks")
    category = load_category(Path(args.data) / "categories" / f"{index['category']}.json", definitions)
    from decision_pipeline.lm.model import count_params, load_model
    from decision_pipeline.lm.bpe import load_tokenizer
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    temps = {"noul": p.temperatures.noul, "choice": p.temperatures.choice, "score": p.temperatures.score}
    config = adapter.AdapterConfig(temperatures=temps, batch_size=p.batch_size, route_fraction=p.route_fraction,
                                   route_eps=p.route_eps, max_new_tokens=p.max_new_tokens, seed=seed)
    read = adapter.model_reader(model, tok, temps, p.batch_size)
    model_id = f"{ORG}__{slug(args.model)}"
    model_info = {"id": model_id, "adapter": adapter.ADAPTER_NAME, "revision": model_revision(model_dir),
                  "total_params": count_params(model)}

    results, chunked, routed = [], 0, 0
    for bid in category.benchmarks:
        definition = definitions[bid]
        t0 = time.time()
        cases = load_cases(data_root, definition)
        predictions, settings = adapter.predict_cases(cases, read, config, model, tok)
        result = build_result(definition, cases, predictions, run_id=f"{ORG}-{slug(args.model)}",
                              model={**model_info, "settings": settings}, elapsed_seconds=round(time.time() - t0, 3),
                              environment={"dataset_source": dict(index["dataset_source"])})
        verify_result(result, cases, definition)  # recompute every stored metric to 1e-8
        results.append(result)
        chunked += settings["many_options"]["chunked_questions"]
        routed += settings["routing"].get("routed", 0)
        info(stage, f"{bid}: adjusted {result['metrics']['baseline_adjusted_score']}")

    metadata = {"model_id": model_id, "display_name": f"{args.model} (pipeline)", "short_name": args.model,
                "total_params": model_info["total_params"]}
    with atomic_dir(out) as tmp:
        write_model_folder(tmp, metadata, results)

    mine = {r["benchmark"]["id"]: summarize_result(r, definitions[r["benchmark"]["id"]]) for r in results}
    tasks = category_tasks(category.benchmarks, definitions)
    per_task = task_scores(mine, tasks)
    metrics = {"category": category.id, "task_avg": task_avg(per_task), "task_scores": per_task,
               "n_benchmarks": len(results), "n_judgments": sum(r["benchmark"]["decision_count"] for r in results),
               "chunked_questions": chunked, "routed_questions": routed}
    if p.cohort_dir:
        cohort_path = Path(p.cohort_dir)
        if not cohort_path.is_dir():
            raise PipelineError(f"{cohort_path}: cohort directory not found; fix s1mb.cohort_dir in params.yaml")
        models = cohort_scores(load_results_dir(cohort_path), definitions)
        if model_id in models:
            info(stage, f"cohort already holds {model_id}; this run replaces it")
        models[model_id] = mine
        points = borda(models, tasks)
        metrics.update(borda=points[model_id], rank=competition_rank(points, model_id),
                       cohort_size=sum(v is not None for v in points.values()))
    write_json(metrics_path, metrics)
    summary(stage, started, benchmarks=len(results), judgments=metrics["n_judgments"],
            task_avg=metrics["task_avg"] if metrics["task_avg"] is not None else "null",
            **({"borda": metrics["borda"], "rank": metrics["rank"]} if p.cohort_dir else {}))


if __name__ == "__main__":
    raise SystemExit(main())

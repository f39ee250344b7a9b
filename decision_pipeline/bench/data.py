"""The S1MB benchmark set the `s1mb@{model}` stages score against (stage `s1mb_data`).

source: synthetic (default/micro profiles)
    Benchmarks in the exact S1MB formats built offline
    (``decision_pipeline.bench.synthetic``): one per (family, task) plus a
    many-option choice set, written as ``benchmarks/``,
    ``categories/<category>.json``, ``datasets/<subset>/test/``. The questions
    come from ``bench_source``: ``transfer`` (default) generates them with the
    bench-only families of ``decision_pipeline.bench.transfer``, whose
    sentences no training family or pretraining document uses (a template
    overlap test keeps it so), so the benchmarks measure transfer; ``items``
    reads the items' own ``bench`` split (training families and templates, in
    no training, calibration or evaluation step), which re-measures the eval
    on unseen slot words.
source: local (GPU profile)
    A local export of the real data, laid out as
        <local_dir>/benchmarks/<id>.json         (upstream evaluator/data/benchmarks)
        <local_dir>/categories/<category>.json   (upstream evaluator/data/categories)
        <local_dir>/datasets/<subset>/...        (the HF dataset's Parquet/JSONL/Arrow files)
    Every benchmark of the category is loaded and validated (rows, targets,
    case and decision counts); its definitions and the category are copied to
    the output and the dataset files are indexed by SHA-256 (they stay in
    place; ``load_index`` re-checks the hashes before scoring reads them).

Both write ``<out>/index.json``: source, category, data_root, dataset_source
{repo_id, revision}, per-benchmark task/counts and the file hashes (synthetic:
also ``bench_source``, and ``items_split``, the split the questions came from,
where that is ``items``).
"""
from __future__ import annotations

import hashlib
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from decision_pipeline.bench import synthetic
from decision_pipeline.bench.s1mb import (
    S1MBError, Benchmark, dump_benchmark, load_benchmarks, load_cases, load_category, read_json, write_json,
)
from decision_pipeline.bench.s1mb.definitions import safe_id
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import file_sha256
from decision_pipeline.common.io import atomic_dir
from decision_pipeline.common.params import rule

INDEX = "index.json"
SYNTHETIC_REPO = "local/s1mb-synthetic"
UPSTREAM_REPO = "hotchpotch/s1mb-dataset"
_HEX40 = re.compile(r"[0-9a-f]{40}")
# The items split the synthetic set is built from: `questions.splits.BENCH_SPLIT` (a test keeps them
# equal; named here so the stage's code deps stay the bench package)
ITEMS_SPLIT = "bench"
BENCH_SOURCES = ("transfer", "items")


@dataclass
class S1mbDataParams:
    """Where the benchmarks come from; `bench_source`, `transfer_per_level`, `max_cases` and `many_options`
    shape the synthetic set only."""
    source: str = rule(choices=("synthetic", "local"), doc="synthetic: built offline (see bench_source); "
                       "local: an export")
    bench_source: str = rule(choices=BENCH_SOURCES, doc="synthetic: transfer = bench-only generators whose "
                             "templates (and two skills) no training or pretraining text has (a transfer test); "
                             "items = the items' bench split (training templates, unseen questions)")
    transfer_per_level: int = rule(min=1, max=40, doc="synthetic, bench_source transfer: questions per "
                                   "(family, level), before max_cases")
    category: str = rule(doc="category id, e.g. synthetic-v1 or english-v1")
    local_dir: str = rule(external=True, doc="local export of the real data (source: local)")
    revision: str = rule(doc="40-hex HF dataset commit of the local export; '' = content hash")
    max_cases: int = rule(min=1, doc="synthetic: cases per family (stable sample)")
    many_options: int = rule(min=9, max=151, doc="synthetic: options of the many-option set")

    def __post_init__(self) -> None:
        try:
            safe_id(self.category, "s1mb_data.category")
        except S1MBError as exc:
            raise PipelineError(f"params.yaml: {exc.detail}") from None
        if self.source == "local" and not self.local_dir:
            raise PipelineError("params.yaml: s1mb_data.local_dir is empty; set it to the local S1MB export "
                                "or use source: synthetic")
        if self.revision and not _HEX40.fullmatch(self.revision):
            raise PipelineError(f"params.yaml: s1mb_data.revision {self.revision!r} must be a 40-hex commit or ''")


def _summary(definitions: dict[str, Benchmark], ids: list[str]) -> dict:
    tasks = Counter(definitions[b].task for b in ids)
    return {"n_benchmarks": len(ids), "n_cases": sum(definitions[b].case_count for b in ids),
            "n_judgments": sum(definitions[b].decision_count for b in ids),
            "benchmarks_per_task": {t: tasks.get(t, 0) for t in ("noul", "choice", "score")}}


def build_synthetic_set(out: Path, questions: list[dict], p: S1mbDataParams, seed: int) -> dict:
    """Write the synthetic set built from `questions` to `out` (the bench split, or `bench.transfer`'s
    questions for `bench_source: transfer`: the stage makes them, so scoring never imports the
    generators); return its index."""
    built = synthetic.build_synthetic(questions, category=p.category, seed=seed, many_options=p.many_options,
                                      max_cases=p.max_cases, source=p.bench_source)
    with atomic_dir(out) as tmp:
        files = synthetic.write_synthetic(tmp, built)
        ids = list(built.category["benchmarks"])
        # Read everything back through the library: what we index is what scoring will see.
        definitions = load_benchmarks(tmp / "benchmarks")
        load_category(tmp / "categories" / f"{p.category}.json", definitions)
        for bid in ids:
            load_cases(tmp, definitions[bid])
        origin = {"bench_source": p.bench_source} | ({"items_split": ITEMS_SPLIT} if p.bench_source == "items" else {})
        index = {"source": "synthetic", **origin, "category": p.category, "data_root": ".",
                 "dataset_source": {"repo_id": SYNTHETIC_REPO, "revision": synthetic.dataset_revision(built)},
                 "benchmarks": {b: {"task": definitions[b].task, "case_count": definitions[b].case_count,
                                    "decision_count": definitions[b].decision_count} for b in ids},
                 "files": files, **_summary(definitions, ids)}
        write_json(tmp / INDEX, index)
    return index


def _dataset_files(root: Path, dataset: str) -> list[Path]:
    return sorted(p for p in (root / dataset).rglob("*") if p.is_file() and not p.name.startswith("."))


def index_local_set(out: Path, p: S1mbDataParams) -> dict:
    """Validate the local export, copy its definitions to `out`, index its files by hash; return the index."""
    root = Path(p.local_dir).expanduser().resolve()
    if not (root / "benchmarks").is_dir() or not (root / "datasets").is_dir():
        raise PipelineError(f"{root}: not an S1MB export (needs benchmarks/, categories/ and datasets/); "
                            "fix s1mb_data.local_dir in params.yaml")
    definitions = load_benchmarks(root / "benchmarks")
    category_file = root / "categories" / f"{p.category}.json"
    if not category_file.is_file():
        raise PipelineError(f"{category_file}: category file not found; fix s1mb_data.category")
    category = load_category(category_file, definitions)
    ids = list(category.benchmarks)
    files: dict[str, str] = {}
    for bid in ids:
        load_cases(root, definitions[bid])  # rows, targets and counts, or an S1MBError naming the problem
        for path in _dataset_files(root, definitions[bid].dataset):
            files.setdefault(path.relative_to(root).as_posix(), file_sha256(str(path)))
    revision = p.revision or hashlib.sha1("".join(f"{k}\0{v}\n" for k, v in sorted(files.items()))
                                          .encode()).hexdigest()
    with atomic_dir(out) as tmp:
        (tmp / "benchmarks").mkdir()
        for bid in ids:
            (tmp / "benchmarks" / f"{bid}.json").write_text(dump_benchmark(definitions[bid]), encoding="utf-8")
        (tmp / "categories").mkdir()
        shutil.copyfile(category_file, tmp / "categories" / category_file.name)
        index = {"source": "local", "category": p.category, "data_root": str(root),
                 "dataset_source": {"repo_id": UPSTREAM_REPO, "revision": revision},
                 "benchmarks": {b: {"task": definitions[b].task, "case_count": definitions[b].case_count,
                                    "decision_count": definitions[b].decision_count} for b in ids},
                 "files": files, **_summary(definitions, ids)}
        write_json(tmp / INDEX, index)
    return index


def load_index(data_dir: str | Path, check_files: bool = True) -> tuple[dict, Path]:
    """Read ``<data_dir>/index.json``; return it and the resolved data root (files re-hashed)."""
    data_dir = Path(data_dir)
    if not (data_dir / INDEX).is_file():
        raise PipelineError(f"{data_dir / INDEX}: not found; run the s1mb_data stage (dvc repro s1mb_data)")
    index = read_json(data_dir / INDEX)
    root = Path(index["data_root"])
    root = root if root.is_absolute() else data_dir / root
    if check_files and index["source"] == "local":
        for rel, digest in index["files"].items():
            path = root / rel
            if not path.is_file() or file_sha256(str(path)) != digest:
                raise PipelineError(f"{path}: the local S1MB export changed since s1mb_data indexed it; "
                                    "rerun `dvc repro -f s1mb_data`")
    return index, root


def build_bench(out: Path, bench_questions: list[dict], p: S1mbDataParams, seed: int) -> dict:
    """Write the benchmark set `p.source` selects to `out`; return its index."""
    if p.source == "synthetic":
        return build_synthetic_set(out, bench_questions, p, seed)
    return index_local_set(out, p)


def bench_metrics(index: dict) -> dict:
    """The stage's metrics: the index's counts and the dataset revision."""
    metrics = {k: index[k] for k in ("source", "category", "n_benchmarks", "n_cases", "n_judgments",
                                     "benchmarks_per_task")}
    metrics["dataset_revision"] = index["dataset_source"]["revision"]
    for key in ("bench_source", "items_split"):
        if key in index:
            metrics[key] = index[key]
    return metrics

"""Published model folders: ``<org>__<model>/metadata.json`` + ``<benchmark-id>.json.xz``.

The published results dataset holds one folder per leaderboard row. We read
them to import a cohort for Borda, and write our own runs in the same shape so
both can be compared by the same code.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .aggregate import BenchmarkScore
from .definitions import Benchmark
from .errors import S1MBError
from .jsonio import read_json, write_json
from .results import check_params, check_result, read_result, summarize_result, write_result

__all__ = ["ModelFolder", "parse_metadata", "load_model_folder", "load_results_dir",
           "write_model_folder", "cohort_scores"]

_METADATA_FIELDS = ("model_id", "display_name", "short_name", "url", "hf_url",
                    "total_params", "active_params", "parameter_count_method")
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*__[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class ModelFolder:
    """One published leaderboard row: ``metadata.json`` plus results keyed by benchmark id."""

    model_id: str
    metadata: dict[str, Any]
    results: dict[str, dict[str, Any]]


def parse_metadata(obj: Any, folder: str | None = None) -> dict[str, Any]:
    """Validate ``metadata.json``; ``model_id`` must equal the folder name."""
    required = {"model_id", "display_name", "short_name"}
    if not isinstance(obj, dict) or not required <= set(obj) <= set(_METADATA_FIELDS):
        raise S1MBError(f"metadata must have model_id, display_name, short_name and only {list(_METADATA_FIELDS)}")
    if not isinstance(obj["model_id"], str) or not _MODEL_ID.fullmatch(obj["model_id"]):
        raise S1MBError(f"metadata model_id {obj['model_id']!r} must look like <org>__<model>")
    if folder is not None and obj["model_id"] != folder:
        raise S1MBError(f"metadata model_id {obj['model_id']!r} differs from folder name {folder!r}")
    for key in ("display_name", "short_name"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise S1MBError(f"metadata {key} must be a non-empty string")
    for key in ("url", "hf_url"):
        url = obj.get(key)
        if url is not None and (not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https")
                                or not urlsplit(url).hostname):
            raise S1MBError(f"metadata {key} {url!r} must be an http(s) URL")
    check_params(obj, obj)
    return obj


def load_model_folder(path: str | Path) -> ModelFolder:
    """Read ``<org>__<model>/`` with ``metadata.json`` and ``<benchmark-id>.json.xz`` files."""
    folder = Path(path)
    try:
        metadata = parse_metadata(read_json(folder / "metadata.json"), folder.name)
    except S1MBError as err:
        raise S1MBError(err.located(), file=str(folder / "metadata.json")) from None
    results: dict[str, dict[str, Any]] = {}
    for file in sorted(folder.iterdir()):
        if file.name == "metadata.json":
            continue
        if not file.is_file() or not file.name.endswith(".json.xz"):
            raise S1MBError("unexpected file in a model folder (only metadata.json and *.json.xz)", file=str(file))
        result = read_result(file)
        if file.name != f"{result['benchmark']['id']}.json.xz":
            raise S1MBError(f"file name differs from benchmark id {result['benchmark']['id']!r}", file=str(file))
        results[result["benchmark"]["id"]] = result
    return ModelFolder(folder.name, metadata, results)


def load_results_dir(path: str | Path) -> dict[str, ModelFolder]:
    """Every model folder of a published results snapshot (root files like viewer-summary.json skipped)."""
    root = Path(path)
    folders = [p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    return {f.name: load_model_folder(f) for f in folders}


def write_model_folder(
    root: str | Path, metadata: Mapping[str, Any], results: Iterable[Mapping[str, Any]]
) -> Path:
    """Write our own results in the published shape: ``<root>/<model_id>/{metadata.json,<id>.json.xz}``."""
    meta = parse_metadata(dict(metadata))
    folder = Path(root) / meta["model_id"]
    written = set()
    for result in results:
        bid = check_result(dict(result))["benchmark"]["id"]
        if bid in written:
            raise S1MBError("two results for the same benchmark in one model folder", benchmark=bid)
        written.add(bid)
        write_result(folder / f"{bid}.json.xz", result)
    write_json(folder / "metadata.json", meta)
    return folder


def cohort_scores(
    folders: Mapping[str, ModelFolder], definitions: Mapping[str, Benchmark]
) -> dict[str, dict[str, BenchmarkScore]]:
    """``{model_id: {benchmark_id: BenchmarkScore}}`` for results whose benchmark is currently defined."""
    out: dict[str, dict[str, BenchmarkScore]] = {}
    for name, folder in folders.items():
        out[name] = {
            bid: summarize_result(result, definitions[bid])
            for bid, result in folder.results.items() if bid in definitions
        }
    return out

"""The noise study's plan file (`.dvc/tmp/noise_study.json`): read and checked in one place, never replaced
without being asked.

Why: `--run`, `--collect` and `--extend` all start from this file, and a person may edit it (drop a run
that keeps failing, as the error lines suggest) or find it half-written by another tool. A damaged plan
(not JSON, no `baseline`, an unknown source, `runs` a list) used to end in a traceback deep in the
collection; here it is one line naming the file and the key. And `--plan` used to overwrite a study
with another silently, losing which runs belonged to it; now a different plan needs `--replace`.
"""
from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.textfile import read_text

REPLAN = "plan the study again (make noise REPLACE=1, or noise-study --plan --replace)"


def _commit(value: Any) -> bool:
    return isinstance(value, str) and 7 <= len(value) <= 64 and all(c in "0123456789abcdef" for c in value)


def read_manifest(path: str | Path, sources: Collection[str], missing: str) -> dict:
    """The plan {baseline: commit, runs: {name: {source, overrides, baseline?}}}; `missing`: what to say when
    there is no plan yet. Every fault is one line naming the file (and the run and key)."""
    p = Path(path)
    if not p.is_file():
        raise PipelineError(f"{p}: {missing}")
    text = read_text(p)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PipelineError(f"{p}: not valid JSON ({exc.msg}, line {exc.lineno}); {REPLAN}") from None
    if not isinstance(data, dict):
        raise PipelineError(f"{p}: holds {type(data).__name__}, not the plan's JSON object; {REPLAN}")
    if not _commit(data.get("baseline")):
        raise PipelineError(f"{p}: key 'baseline' is {data.get('baseline')!r}, not a commit id; {REPLAN}")
    runs = data.get("runs")
    if not isinstance(runs, dict):
        raise PipelineError(f"{p}: key 'runs' is {type(runs).__name__}, expected a mapping of run name to "
                            f"{{source, overrides}}; {REPLAN}")
    for name, entry in runs.items():
        where = f"{p}: run '{name}'"
        if not isinstance(entry, dict):
            raise PipelineError(f"{where} is {type(entry).__name__}, expected {{source, overrides}}; {REPLAN}")
        if not isinstance(entry.get("source"), str) or entry["source"] not in sources:
            raise PipelineError(f"{where}: source {entry.get('source')!r} is not one of {', '.join(sources)}; remove "
                                f"the run or {REPLAN}")
        overrides = entry.get("overrides")
        if not isinstance(overrides, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float))
                                                      and not isinstance(v, bool) for k, v in overrides.items()):
            raise PipelineError(f"{where}: 'overrides' is {overrides!r}, expected a mapping of param key to "
                                f"value; {REPLAN}")
        if "baseline" in entry and not _commit(entry["baseline"]):
            raise PipelineError(f"{where}: 'baseline' is {entry['baseline']!r}, not a commit id; {REPLAN}")
    return data


def check_replace(path: str | Path, new: Mapping[str, Any], sources: Collection[str], replace: bool) -> None:
    """`--plan` over an existing study: the same plan again is fine (`make noise` resumed); another is refused
    unless `replace`, so a study's runs are never forgotten by accident."""
    p = Path(path)
    if replace or not p.is_file():
        return
    try:
        old = read_manifest(p, sources, "")
    except PipelineError as exc:
        raise PipelineError(f"{exc} (--replace writes the new plan over it)") from None
    if old == dict(new):
        return
    raise PipelineError(f"{p}: a study planned from {old['baseline'][:12]} with {len(old['runs'])} runs is recorded, "
                        f"and this plan differs; collect it (make noise-collect) or plan anew with --replace "
                        "(make noise REPLACE=1): its finished runs stay in `dvc exp list`")

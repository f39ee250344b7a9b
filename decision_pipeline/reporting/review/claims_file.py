"""The claims file's verdicts, judged as one family, from each comparison's per-run values.

Why: the claims file keeps every comparison's paired difference per whole-chain run (`per_run`), so
its verdicts can be recomputed without the experiment refs: `noise-study --rejudge` rereads the file,
checks it, judges each comparison by common/verdict.py and the family by Holm, and rewrites it
atomically. `--collect` uses the same `judge_family`, so a collected and a rejudged file agree. `make review` lists the
claims' verdicts beside the base's (`review_section`), a flipped one marked.
"""
from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.common.verdict import ALPHA, N_MIN, family_verdicts, seed_verdict
from decision_pipeline.reporting.report.claims import WHOLE_CHAIN, check_claims, parse_terms, verdict_cell

NOISE_SOURCE = "whole-chain reruns: sd of the difference"
#: what each comparison carries into a rejudge; everything else is recomputed
KEPT = ("label", "metric", "per_run", "runs", "noise_source")
#: the per-run values are judged as written (rounded), so a rejudge of a collected file changes nothing
DIGITS = 4
DASH = "\u2014"


def judge_family(entries: Mapping[str, Mapping[str, Any]], n_min: int = N_MIN) -> dict[str, dict]:
    """{name: comparison} from {name: {label, metric, per_run, runs, noise_source}}: each judged over its
    runs (values rounded to DIGITS first, as the file keeps them), then the family on its Holm-adjusted p
    (verdict.family_verdicts)."""
    each = {name: seed_verdict([round(float(x), DIGITS) for x in e["per_run"]],
                               noise_source=e.get("noise_source", NOISE_SOURCE), n_min=n_min, digits=DIGITS)
            for name, e in entries.items()}
    judged = family_verdicts(each)
    return {name: {"label": e["label"], "metric": e["metric"], **judged[name], "runs": list(e["runs"])}
            for name, e in entries.items()}


def header(n_min: int, m: int) -> dict:
    """The claims file's family fields: who adjusts, at which level, over how many comparisons."""
    return {"n_min": n_min, "source": WHOLE_CHAIN, "adjustment": "holm", "alpha": round(ALPHA, 6), "family_size": m}


def _entry(path: str, name: str, c: object) -> dict:
    where = lambda k: f"{path}: key 'comparisons.{name}.{k}"  # noqa: E731
    if not isinstance(c, dict):
        raise PipelineError(f"{path}: key 'comparisons.{name}' is not a mapping")
    gone = [k for k in KEPT if k not in c]
    if gone:
        raise PipelineError(f"{where(gone[0])}' missing; a rejudge needs {', '.join(KEPT)} of every comparison "
                            "(collect the study again: noise-study --collect)")
    for k in ("label", "metric", "noise_source"):
        if not isinstance(c[k], str) or not c[k]:
            raise PipelineError(f"{where(k)}' is {c[k]!r}, expected text")
    parse_terms(c["metric"], f"{where('metric')}'")
    per_run, runs = c["per_run"], c["runs"]
    if not isinstance(per_run, list) or len(per_run) < 2:
        raise PipelineError(f"{where('per_run')}' holds {per_run!r}; a verdict needs n >= 2 paired runs")
    for i, v in enumerate(per_run):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise PipelineError(f"{where('per_run')}.{i}' is {v!r}, expected a finite number")
    if not isinstance(runs, list) or len(runs) != len(per_run) or not all(isinstance(r, str) for r in runs):
        raise PipelineError(f"{where('runs')}' must name the {len(per_run)} runs behind per_run, in order")
    return {k: c[k] for k in KEPT}


def rejudge(data: object, path: str) -> dict:
    """The claims file `data` with every verdict recomputed from its per-run values (nothing else read)."""
    if not isinstance(data, dict) or not isinstance(data.get("comparisons"), dict) or not data["comparisons"]:
        raise PipelineError(f"{path}: key 'comparisons' missing, empty or not a mapping")
    if data.get("source") != WHOLE_CHAIN:
        raise PipelineError(f"{path}: key 'source' is {data.get('source')!r}, an unknown source for claims; they are "
                            f"paired over the whole-chain reruns ('{WHOLE_CHAIN}')")
    n_min = data.get("n_min")
    if isinstance(n_min, bool) or not isinstance(n_min, int) or n_min < 2:
        raise PipelineError(f"{path}: key 'n_min' is {n_min!r}, expected an integer >= 2")
    entries = {name: _entry(path, name, c) for name, c in data["comparisons"].items()}
    comparisons = judge_family(entries, n_min)
    out = {**{k: v for k, v in data.items() if k not in ("comparisons",)}, **header(n_min, len(comparisons)),
           "comparisons": comparisons}
    check_claims(out, path)                  # what the report will read: refuse to write what it would refuse
    return out


def rejudge_file(path: Path) -> dict:
    """Read, rejudge and atomically rewrite `path`; returns the new content (nothing written on bad input)."""
    if not path.is_file():
        raise PipelineError(f"{path}: no claims file; collect a noise study first (make noise)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PipelineError(f"{path}: not valid UTF-8 JSON ({exc}); collect the study again") from None
    out = rejudge(data, str(path))
    write_text_atomic(path, json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


def claims_at(rev: str, path: str = "metrics/claims.json") -> dict | None:
    """The claims file as committed at `rev` (None when it has none or it is not JSON)."""
    proc = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None


def review_section(base: str, base_data: dict | None, work_data: dict | None, path: str = "metrics/claims.json") -> list[str]:
    """The review's claims: each comparison's verdict in the workspace (on the Holm-adjusted p over the family)
    beside the base's, a flipped verdict marked, so a change that moves a finding says so. The base is read
    leniently (it may predate the family fields); the workspace file is checked as the report checks it."""
    if work_data is None:
        return []
    claims = check_claims(work_data, path)[1]
    before = {name: c.get("verdict") for name, c in ((base_data or {}).get("comparisons") or {}).items()
              if isinstance(c, dict)}
    out = ["", f"### Claims (`{path}`, Holm's correction over the {claims[0].family_size} comparisons)", "",
           f"| comparison | {base} | workspace (Holm-adjusted p) | |", "|---|---|---|---|"]
    for c in claims:
        old = before.get(c.name)
        mark = "" if old is None or old == c.verdict else "**verdict changed**"
        out.append(f"| {c.label} | {old or DASH} | {verdict_cell(c.verdict, c.p_adjusted)} | {mark} |")
    return out

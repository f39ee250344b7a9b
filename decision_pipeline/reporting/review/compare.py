"""`make compare`: the experiments' headline numbers beside the committed run's, each change marked
against its run-to-run noise.

Why: `dvc exp show --md --only-changed` lists what moved but not whether it moved beyond chance. This
reads the same experiments (`dvc exp show --json`, the declared metrics/headline.json) and marks every
changed headline with the marks of `make review` (reporting/review/diff.py): inside or outside the
whole-chain reseed band of its source metric (metrics/noise/reseed.json; t(0.975, n-1) x sqrt(2) x sd),
outside noise only where the false-discovery control across the experiment's judged headlines keeps it,
and "set by the change" for a number the experiment's params set by construction. One number format
(4 significant digits) for every value, a legend under the table.

    python -m decision_pipeline compare            # make compare
"""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.review.diff import (
    ADDED, CHANCE, IN, LEGEND, NONE, OUT, SET, SETUP, bands, mark_judged, noise_files, set_by, verdict)
from decision_pipeline.reporting.review.spread import flatten
from decision_pipeline.reporting.report.sections import SECTIONS

HEADLINE = "metrics/headline.json"
MARK = {OUT: "outside noise", CHANCE: CHANCE, IN: IN, SET: SET, SETUP: "fixed by the setup", NONE: "no recorded noise"}


def _params(data: dict) -> dict[str, Any]:
    return flatten((((data.get("params") or {}).get("params.yaml") or {}).get("data")) or {})


def _runs(show: Any) -> list[tuple[str, dict, dict]]:
    """(name, headline values, flat params) of the baseline(s) and their experiments in `dvc exp show --json`
    order."""
    out = []
    for base in show if isinstance(show, list) else []:
        if not isinstance(base, dict) or base.get("rev") == "workspace":
            continue
        rows = [(base.get("name") or str(base.get("rev", ""))[:7], base.get("data") or {})]
        for exp in base.get("experiments") or []:
            for rev in exp.get("revs") or []:
                rows.append((exp.get("name") or rev.get("name") or str(rev.get("rev", ""))[:7], rev.get("data") or {}))
        for name, data in rows:
            values = (((data.get("metrics") or {}).get(HEADLINE) or {}).get("data")) or {}
            if values:
                out.append((name, values, _params(data)))
    return out


def fmt(value: Any) -> str:
    """Every number of the table in one format: 4 significant digits."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.4g}"
    return "—" if value is None else str(value)


def _params_diff(base: dict, exp: dict) -> dict:
    """`dvc params diff`'s shape: {'params.yaml': {key: {old, new}}} for the params that differ."""
    keys = sorted(k for k in set(base) | set(exp) if base.get(k) != exp.get(k))
    return {"params.yaml": {k: {"old": base.get(k), "new": exp.get(k)} for k in keys}}


def _marked(names: list[str], base: dict, values: dict, params: dict, noise: dict,
            labels: dict[str, tuple[str, str | None, str | None]]) -> dict[str, str]:
    """One experiment's cells: value, change and mark per changed headline, judged as one family."""
    rows = []
    for n in names:
        _, file, key = labels.get(n, (n, None, None))
        new, old = values.get(n), base.get(n)
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (new, old))
        change = new - old if numeric else None
        param = set_by(file, key, old, new, params) if numeric and file else None
        nz = noise.get((file, key))
        rows.append({"name": n, "new": new, "change": change, "noise": nz, "set_by": param,
                     "verdict": SET if param else verdict(change, nz) if numeric else ADDED})
    mark_judged(rows)
    cells = {}
    for r in rows:
        if r["change"] in (None, 0):      # added, or moved only in another experiment
            cells[r["name"]] = fmt(r["new"])
        else:
            cells[r["name"]] = f"{fmt(r['new'])} ({r['change']:+.4g}, {MARK[r['verdict']]})"
    return cells


def table(runs: list[tuple[str, dict, dict]], noise: dict) -> str:
    """Markdown: one row per headline that differs in some experiment, baseline first, then the legend.
    With no experiment yet, the baseline's headline numbers alone (a two-column table)."""
    if not runs:
        return f"No run has {HEADLINE} yet: `make run` first, then an experiment (`dvc exp run -S key=value`)."
    labels = {h.name: (h.label, h.file, h.keys[0]) for sec in SECTIONS for h in sec.headlines}
    (base_name, base, base_params), exps = runs[0], runs[1:]
    if not exps:
        lines = [f"| quantity | {base_name} |", "|---|---|"]
        lines += [f"| {labels.get(n, (n,))[0]} | {fmt(v)} |" for n, v in base.items()]
        return "\n".join(lines + ["", f"No experiment of {base_name} yet: `dvc exp run -S key=value` adds a column "
                                      "(a number that moved is marked against its run-to-run noise)."])
    names = [n for n in base if any(v.get(n) != base.get(n) for _, v, _ in exps)]
    head = f"| quantity | {base_name} | " + " | ".join(n for n, _, _ in exps) + " |"
    lines = [head, "|" + "---|" * (len(exps) + 2)]
    cells = [_marked(names, base, v, _params_diff(base_params, p), noise, labels) for _, v, p in exps]
    for n in names:
        lines.append(f"| {labels.get(n, (n,))[0]} | {fmt(base.get(n))} | " + " | ".join(c[n] for c in cells) + " |")
    if not names:
        lines.append("| (no headline number changed) |" + " |" * (len(exps) + 1))
    legend = [f"- {MARK[m]}: {LEGEND[m]}" for m in (IN, OUT, CHANCE, SET)]
    return "\n".join(lines + ["", f"Marks (a change is the experiment minus {base_name}; one experiment's changed "
                                   "numbers are judged together against the whole-chain reseed noise):", *legend])


def main(argv: list[str] | None = None) -> int:
    try:
        proc = subprocess.run(["dvc", "exp", "show", "--json"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise PipelineError(f"dvc exp show: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
        noise = bands(noise_files(), "reseed")
        print(table(_runs(json.loads(proc.stdout or "[]")), noise))
        if not noise:
            print("\n(no metrics/noise/reseed.json: run `make noise` to mark changes against run-to-run noise)")
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0

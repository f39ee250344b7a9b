"""`make compare`: the experiments' headline numbers beside the committed run's, each change marked
against its run-to-run noise.

Why: `dvc exp show --md --only-changed` lists what moved but not whether it moved beyond chance. This
reads the same experiments (`dvc exp show --json`, the declared metrics/headline.json) and marks every
changed headline against the whole-chain reseed band of its source metric (metrics/noise/reseed.json;
the rule of reporting/review/diff.py: t(0.975, n-1) x sqrt(2) x sd).

    python -m decision_pipeline compare            # make compare
"""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.review.diff import OUT, bands, noise_files, verdict
from decision_pipeline.reporting.report.sections import SECTIONS

HEADLINE = "metrics/headline.json"


def _runs(show: Any) -> list[tuple[str, dict]]:
    """(name, headline values) of the baseline(s) and their experiments in `dvc exp show --json` order."""
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
                out.append((name, values))
    return out


def table(runs: list[tuple[str, dict]], noise: dict) -> str:
    """Markdown: one row per headline that differs in some experiment, baseline first."""
    if not runs:
        return f"No experiment has {HEADLINE} yet: run one (`dvc exp run -S key=value`) after `make run`."
    labels = {h.name: (h.label, h.file, h.keys[0]) for sec in SECTIONS for h in sec.headlines}
    (base_name, base), exps = runs[0], runs[1:]
    names = [n for n in base if any(v.get(n) != base.get(n) for _, v in exps)]
    head = f"| quantity | {base_name} | " + " | ".join(n for n, _ in exps) + " |"
    lines = [head, "|" + "---|" * (len(exps) + 2)]
    for n in names:
        label, file, key = labels.get(n, (n, None, None))
        cells = []
        for _, v in exps:
            new, old = v.get(n), base.get(n)
            if not isinstance(new, (int, float)) or not isinstance(old, (int, float)):
                cells.append("—" if new is None else str(new))
                continue
            mark = verdict(new - old, noise.get((file, key)))
            cells.append(f"{new:.4g} ({new - old:+.3g}{', outside noise' if mark == OUT else ''})")
        lines.append(f"| {label} | {base.get(n) if base.get(n) is not None else '—'} | " + " | ".join(cells) + " |")
    if not names:
        lines.append("| (no headline number changed) |" + " |" * (len(exps) + 1))
    return "\n".join(lines)


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


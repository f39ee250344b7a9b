"""The suite's wall time and where its test time goes, from a `pytest --durations=0` log.

Why a script: the per-file seconds in docs/performance.md were added up by hand from two logs; this
reads the log pytest already writes (`-q --durations=0`: one line per setup, call and teardown, and
the closing `N passed ... in S s` line) and records one run under a label in a JSON file, so a second
run on the same machine and hour (the baseline: `git stash`, run, `git stash pop`) lands beside it.

    PIPELINE_QUIET=1 python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=0 > LOG
    python perf/suite_durations.py LOG --label after --commit HEAD --json metrics/perf/suite.json
    python perf/suite_durations.py --table 12 --json metrics/perf/suite.json   # per-file markdown table
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from decision_pipeline.common.io import write_json

LINE = re.compile(r"^(?P<s>\d+(?:\.\d+)?)s (?P<when>setup|call|teardown)\s+(?P<file>[^:\s]+)::")
SUMMARY = re.compile(r"^(?P<passed>\d+) passed(?:, (?P<skipped>\d+) skipped)?.* in (?P<wall>\d+(?:\.\d+)?)s")
FAILED = re.compile(r"^\d+ failed|^FAILED ")


def parse(text: str) -> dict:
    """Wall time, counts and seconds per test file of one pytest run (a failed run is refused)."""
    files: Counter = Counter()
    summary = None
    for line in text.splitlines():
        if FAILED.search(line):
            raise SystemExit("suite_durations: the log holds failures; time a passing run")
        if m := LINE.match(line):
            files[m["file"]] += float(m["s"])
        elif m := SUMMARY.match(line):
            summary = m
    if summary is None or not files:
        raise SystemExit("suite_durations: no '--durations=0' lines or no 'N passed ... in S s' line in the log")
    return {"passed": int(summary["passed"]), "skipped": int(summary["skipped"] or 0),
            "wall_s": round(float(summary["wall"]), 1), "test_s": round(sum(files.values()), 1),
            "files": {k: round(v, 1) for k, v in files.most_common()}}


def table(runs: dict, top: int, labels: list[str] | None = None) -> str:
    """Markdown: the `top` longest files of the last run, seconds in every run, then the rest summed."""
    labels = labels or list(runs)
    last = runs[labels[-1]]["files"]
    names = sorted(last, key=last.get, reverse=True)[:top]
    rows = ["| file | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for name in names:
        cells = [f"{runs[l]['files'].get(name, 0):.0f}" for l in labels]
        rows.append(f"| `{name.removeprefix('tests/')}` | " + " | ".join(cells) + " |")
    rest = [sum(v for k, v in runs[l]["files"].items() if k not in names) for l in labels]
    count = len(set(last) - set(names))
    rows.append(f"| the other {count} files | " + " | ".join(f"{v:.0f}" for v in rest) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", nargs="?", type=Path)
    ap.add_argument("--label", help="the run's name in the JSON (before, after, ...)")
    ap.add_argument("--commit", default="HEAD", help="the commit the run tested (recorded as its short hash)")
    ap.add_argument("--dirty", action="store_true", help="the run tested uncommitted changes on top of --commit")
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--table", type=int, default=0, help="print the per-file table of the N longest files")
    ap.add_argument("--labels", help="the runs the table shows, comma-separated (default: all)")
    a = ap.parse_args(argv)
    runs = json.loads(a.json.read_text()) if a.json.is_file() else {}
    if a.log is not None:
        if not a.label:
            raise SystemExit("suite_durations: --label names the run")
        run = parse(a.log.read_text(errors="replace"))
        commit = subprocess.run(["git", "rev-parse", "--short", a.commit], capture_output=True, text=True,
                                check=True).stdout.strip()
        runs.setdefault("machine_dependent", True)
        cpus = len(os.sched_getaffinity(0))
        runs.setdefault("runs", {})[a.label] = {"commit": commit + ("+changes" if a.dirty else ""),
                                                 "machine": f"{platform.machine()}, {cpus} CPUs", **run}
        write_json(a.json, runs)
        print(f"{a.label}: {run['passed']} passed, {run['skipped']} skipped, wall {run['wall_s']} s, "
              f"test time {run['test_s']} s over the workers")
    if a.table:
        print(table(runs.get("runs", {}), a.table, a.labels.split(",") if a.labels else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())

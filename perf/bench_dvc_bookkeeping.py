"""What DVC's bookkeeping costs per stage, on the committed, up-to-date workspace.

After a stage's command exits, `dvc repro` does three things before the next stage starts
(`dvc/stage/__init__.py: Stage.run`, then `dvc/repo/reproduce.py`): `save` (hash every dep and out, write
the run-cache entry), `commit` (outs into the cache) and `dump` (DVC re-parses the stage's whole lock file
with ruamel's round-trip loader and writes it back). This calls the same three methods, in the same
order, for every stage of the pipeline, in one process, and prints the per-stage median and the total of
each part, plus each lock file's size. Nothing changes on disk: every stage is up to date, so the lock
files are rewritten to the same bytes (checked; the script fails if they are not).

    python perf/bench_dvc_bookkeeping.py [--cli 5] [--json OUT]

`--cli N` also times, N times each, `dvc --version` (start-up), `dvc status` and a no-op `dvc repro` as
a user runs them (separate processes) and prints their medians and their ratios to the start-up.

Issue 52's figures (before and after the lock change, same machine) are in docs/performance.md.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from decision_pipeline.common.dvcfiles import lock_files

DVC = [sys.executable, "-m", "dvc"]


def measure() -> dict:
    from dvc.repo import Repo

    with Repo(".") as repo, repo.lock:   # the repo lock `dvc repro` holds (commit asserts it)
        stages = [s for s in repo.index.stages if s.cmd]
        stale = [s.addressing for s in stages if s.changed()]
        if stale:   # checked before anything is written: saving a changed stage would record it as up to date
            raise SystemExit(f"error: {', '.join(stale)} not up to date; run `dvc repro` before measuring")
        locks = lock_files(Path("."))
        before = {p: p.read_bytes() for p in locks}
        rows = []
        for stage in stages:
            t0 = time.perf_counter()
            stage.save(run_cache=True)
            t1 = time.perf_counter()
            stage.commit()
            t2 = time.perf_counter()
            stage.dump(update_pipeline=False)
            t3 = time.perf_counter()
            rows.append({"stage": stage.addressing, "save": t1 - t0, "commit": t2 - t1, "dump": t3 - t2,
                         "total": t3 - t0})
        changed = [str(p) for p in locks if p.read_bytes() != before[p]]
    if changed:
        raise SystemExit(f"error: {', '.join(changed)} changed: the workspace was not up to date "
                         "(run `dvc status`, then `dvc repro`, before measuring)")
    med = {k: statistics.median(r[k] for r in rows) for k in ("save", "commit", "dump", "total")}
    return {"machine": platform.processor() or platform.machine(), "stages": len(rows),
            "lock_files": {str(p): p.stat().st_size for p in locks},
            "median_s": {k: round(v, 3) for k, v in med.items()},
            "sum_s": {k: round(sum(r[k] for r in rows), 1) for k in ("save", "commit", "dump", "total")},
            "slowest": sorted(({"stage": r["stage"], "total_s": round(r["total"], 3)} for r in rows),
                              key=lambda r: -r["total_s"])[:5]}


def cli_medians(n: int) -> dict:
    """Median wall seconds of `dvc --version`, `dvc status` and a no-op `dvc repro`, n runs each, interleaved."""
    cmds = {"version": [*DVC, "--version"], "status": [*DVC, "status", "-q"], "noop_repro": [*DVC, "repro", "-q"]}
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(n):
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            times[name].append(time.perf_counter() - t0)
            if proc.returncode != 0 or (name == "noop_repro" and "Running stage" in proc.stdout):
                raise SystemExit(f"error: {' '.join(cmd[2:])} did not finish as a no-op (exit {proc.returncode}); "
                                 "run `dvc repro` first")
    med = {k: round(statistics.median(v), 3) for k, v in times.items()}
    return {"runs": n, "median_s": med,
            "ratio_to_version": {k: round(med[k] / med["version"], 1) for k in ("status", "noop_repro")}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--cli", type=int, default=0, metavar="N", help="also time the dvc commands N times each")
    args = ap.parse_args(argv)
    out = measure()
    print(f"{out['stages']} stages; lock files: "
          + ", ".join(f"{p} {n / 1024:.0f} KiB" for p, n in out["lock_files"].items()))
    m, s = out["median_s"], out["sum_s"]
    print(f"per stage (median): save {m['save']:.3f} s, commit {m['commit']:.3f} s, dump {m['dump']:.3f} s, "
          f"total {m['total']:.3f} s")
    print(f"all stages: save {s['save']} s, commit {s['commit']} s, dump {s['dump']} s, total {s['total']} s")
    if args.cli:
        out["cli"] = cli_medians(args.cli)
        m, r = out["cli"]["median_s"], out["cli"]["ratio_to_version"]
        print(f"median of {args.cli}: dvc --version {m['version']:.2f} s, dvc status {m['status']:.2f} s "
              f"({r['status']}x), no-op dvc repro {m['noop_repro']:.2f} s ({r['noop_repro']}x)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Pull-request review: params and metrics diff against a base revision, each change read against its noise.

Why: `dvc metrics diff` lists every number that moved, and most moves on a
small model are noise. This marks each change as inside or outside the noise
recorded next to it — a 95% CI half-width, a repeat-run half-range or a noise
floor — so a reviewer reads the few changes that exceed it first.

Where a metric's noise comes from (first rule that applies):
1. the report registry: a headline's value key gets its CI / noise keys
   (e.g. `readout.accuracy` <- `cis.readout_accuracy.ci_low/ci_high`);
2. siblings: a value next to `ci_low` and `ci_high` (the `cis`, `vs_base`,
   `ece_change` blocks) gets their half-width; `mean` next to `p2_5`/`p97_5`
   likewise;
3. `metrics/summary.json`: a name with `_ci_low/_ci_high`, `_noise` or `_noise_floor`;
4. a mirrored CI block: `X` (or `X_routed`) gets the half-width of `cis.X` (or `cis_routed.X`), as the
   S1MB metrics store `task_avg` beside `cis.task_avg.ci_low/ci_high` (item bootstrap);
5. a proportion over items (`accuracy`, `parse_rate`, `coverage`, `rate`, `*_rate`, `*_share`,
   `agreement.*`) with an item count `n` in its own block or an ancestor (the file's top-level `n` only
   outside `by_*` groups, whose members count fewer items) gets its Wilson 95% half-width: the sampling
   noise of a share of n items, what an item bootstrap would give.
6. repeat runs: a per-seed list `seeds.X` gives `seeds.X_mean` and the first seed's `heldout.X` its
   half-range (max - min) / 2.
7. reseed noise: any other metric gets its half-range over whole-chain reruns under other
   `base.seed`s (`metrics/noise_reseed.json`, reporting/reseed_noise.py), when one was measured.
A CI bound (`ci_low`, `ci_high`, `p2_5`, `p97_5`; summary `_ci_low/_ci_high/_noise/_noise_floor`; a seeds
block's `X_min/X_max/X_halfrange`) is the noise of the metric beside it, shown in that metric's row, not a
row of its own.
A metric with no noise that is fixed by the inputs and params (item counts, resample counts, a
params echo: `DETERMINISTIC`) says "deterministic by construction" instead of "no recorded noise".
The larger of the base's and the workspace's half-width is used, so a change
is called outside the noise only when it exceeds both runs' recorded noise.

    python -m decision_pipeline.reporting.review --base main --out review   # make review
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.reporting import review_plots
from decision_pipeline.reporting.registry import Headline, halfwidth_from_summary
from decision_pipeline.reporting.reseed_noise import NOISE_FILE
from decision_pipeline.reporting.sections import SECTIONS
from decision_pipeline.reporting.sources import lookup

SUMMARY = "metrics/summary.json"
BOUND_KEYS = {"ci_low", "ci_high", "p2_5", "p97_5"}
#: leaves fixed by the inputs and params alone: a change in them is a change of setup, never noise
DETERMINISTIC = {"n", "n_items", "n_benchmarks", "n_judgments", "n_resamples", "n_draws", "route_fraction",
                 "confidence", "bootstrap"}
DET = "deterministic by construction"


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(obj, dict):
        return {prefix: obj}
    out: dict[str, Any] = {}
    for k, v in obj.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _headline_hw(h: Headline, data: dict, noise_data: dict) -> float | None:
    def get(d: dict, k: str | None) -> float | None:
        return None if k is None else _num(lookup(d, k))
    lo, hi = get(data, h.lo), get(data, h.hi)
    if lo is not None and hi is not None:
        return (hi - lo) / 2
    noise = get(noise_data, h.noise)
    return noise if noise is not None else get(noise_data, h.floor)


def _mirrored_hw(flat: dict[str, Any], key: str) -> float | None:
    """Half-width of the CI block mirroring `key` (`cis.<key>`, or `cis_routed.<key without _routed>`)."""
    head, _, rest = key.partition(".")
    if head in ("cis", "cis_routed"):
        return None
    for block, suffix in (("cis", ""), ("cis_routed", "_routed")):
        if suffix and not head.endswith(suffix):
            continue
        target = ".".join([block, head[:len(head) - len(suffix)]] + ([rest] if rest else []))
        lo, hi = _num(flat.get(f"{target}.ci_low")), _num(flat.get(f"{target}.ci_high"))
        if lo is not None and hi is not None:
            return (hi - lo) / 2
    return None


Z95 = 1.959964


def wilson_halfwidth(p: float, n: float) -> float:
    """Half-width of the Wilson 95% score interval of a share p of n items (nonzero at p = 0 or 1)."""
    z2 = Z95 * Z95
    return Z95 / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))


def _is_proportion(key: str) -> bool:
    parent, _, leaf = key.rpartition(".")
    return (leaf in {"accuracy", "parse_rate", "coverage", "rate", "accept_rate"} or leaf.endswith(("_rate", "_share"))
            or parent.rpartition(".")[2] == "agreement")


def _item_count(flat: dict[str, Any], key: str) -> float | None:
    """The nearest `n` in the key's block or an ancestor; the top-level one not inside a `by_*` group."""
    parts = key.split(".")[:-1]
    for depth in range(len(parts), -1, -1):
        if depth == 0 and any(p.startswith("by_") for p in parts):
            return None
        n = _num(flat.get(".".join(parts[:depth] + ["n"])))
        if n is not None and n >= 1:
            return n
    return None


def is_bound(path: str, key: str) -> bool:
    """A CI bound or a summary noise entry: the noise of another row, not a row itself."""
    parent, _, leaf = key.rpartition(".")
    if leaf in BOUND_KEYS or (parent.rpartition(".")[2] == "seeds" and leaf.endswith(("_min", "_max", "_halfrange"))):
        return True
    return path == SUMMARY and key.endswith(("_ci_low", "_ci_high", "_noise", "_noise_floor"))


def noise_index(metrics: dict[str, Any], headlines: tuple[Headline, ...] | None = None) -> dict[tuple[str, str], float]:
    """Half-width per (file, flattened key) from one revision's metrics files ({path: parsed JSON})."""
    if headlines is None:
        headlines = tuple(h for sec in SECTIONS for h in sec.headlines)
    index: dict[tuple[str, str], float] = {}
    for path, data in metrics.items():
        if path == NOISE_FILE:
            continue
        flat = _flatten(data)
        parents: dict[str, dict[str, Any]] = {}
        for key, value in flat.items():
            parent, _, leaf = key.rpartition(".")
            parents.setdefault(parent, {})[leaf] = value
        for parent, leaves in parents.items():
            for lo_k, hi_k, targets in (("ci_low", "ci_high", None), ("p2_5", "p97_5", ("mean",))):
                lo, hi = _num(leaves.get(lo_k)), _num(leaves.get(hi_k))
                if lo is None or hi is None:
                    continue
                for leaf in leaves:
                    if leaf not in BOUND_KEYS and (targets is None or leaf in targets):
                        index[(path, f"{parent}.{leaf}" if parent else leaf)] = (hi - lo) / 2
        for key in flat:
            hw = _mirrored_hw(flat, key)
            if hw is not None:
                index.setdefault((path, key), hw)
        for key, value in flat.items():
            p, n = _num(value), None
            if p is not None and 0.0 <= p <= 1.0 and _is_proportion(key) and (path, key) not in index:
                n = _item_count(flat, key)
            if n is not None:
                index[(path, key)] = wilson_halfwidth(p, n)
        for key, value in flat.items():
            parent, _, leaf = key.rpartition(".")
            per_seed = [_num(v) for v in value] if isinstance(value, list) else []
            if parent.rpartition(".")[2] == "seeds" and len(per_seed) >= 2 and None not in per_seed:
                hw = (max(per_seed) - min(per_seed)) / 2
                for target in (f"{key}_mean", f"heldout.{leaf}"):
                    if target in flat:
                        index.setdefault((path, target), hw)
        if path == SUMMARY and isinstance(data, dict):
            for name in data:
                hw = halfwidth_from_summary(data, name)
                if hw is not None and not any(name.endswith(f"_{s}") for s in ("ci_low", "ci_high", "noise", "noise_floor")):
                    index[(path, name)] = hw
    for h in headlines:
        data = metrics.get(h.file)
        if not isinstance(data, dict):
            continue
        hw = _headline_hw(h, data, metrics.get(h.noise_file or h.file) or {})
        if hw is not None:
            for key in h.keys:
                index[(h.file, key)] = hw
    reseed = (metrics.get(NOISE_FILE) or {}).get("halfrange") or {}
    for path, keys in reseed.items():
        for key, hw in keys.items():
            if path in metrics and _num(hw) is not None:
                index.setdefault((path, key), float(hw))
    return index


def coverage(metrics: dict[str, Any], index: dict[tuple[str, str], float]) -> dict[str, Any]:
    """Every numeric metric leaf (not a CI bound) sorted into: with noise, deterministic by construction, none."""
    out: dict[str, Any] = {"metrics": 0, "with_noise": 0, "deterministic": 0, "none": []}
    for path, data in sorted(metrics.items()):
        if path == NOISE_FILE:
            continue
        for key, value in _flatten(data).items():
            if _num(value) is None or is_bound(path, key):
                continue
            out["metrics"] += 1
            if (path, key) in index:
                out["with_noise"] += 1
            elif key.rpartition(".")[2] in DETERMINISTIC:
                out["deterministic"] += 1
            else:
                out["none"].append(f"{path}:{key}")
    return out


def verdict(change: float | None, hw: float | None, key: str = "") -> str:
    if change is None:
        return "added/removed"
    if hw is None:
        return DET if key.rpartition(".")[2] in DETERMINISTIC else "no recorded noise"
    return "**outside noise**" if abs(change) > hw else "inside noise"


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return "—" if v is None else str(v).replace("|", "\\|")


def metric_rows(metrics_diff: dict, old_noise: dict, new_noise: dict) -> list[dict]:
    """One row per changed metric with its noise half-width and verdict, outside-noise first."""
    rows = []
    for path, changes in metrics_diff.items():
        for key, ch in (changes or {}).items():
            if is_bound(path, key):
                continue
            old, new = ch.get("old"), ch.get("new")
            change = _num(ch.get("diff"))
            if change is None and _num(old) is not None and _num(new) is not None:
                change = _num(new) - _num(old)
            hws = [h for h in (old_noise.get((path, key)), new_noise.get((path, key))) if h is not None]
            hw = max(hws) if hws else None
            rows.append({"file": path, "key": key, "old": old, "new": new, "change": change, "noise": hw,
                         "verdict": verdict(change, hw, key)})
    order = {"**outside noise**": 0, "inside noise": 1, "no recorded noise": 2, DET: 3, "added/removed": 4}
    return sorted(rows, key=lambda r: (order[r["verdict"]], r["file"], r["key"]))


def _table(rows: list[dict], base: str) -> list[str]:
    lines = [f"| file | metric | {base} | workspace | change | noise ± | verdict |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['file']} | {r['key']} | {_cell(r['old'])} | {_cell(r['new'])} | {_cell(r['change'])} | "
              f"{_cell(r['noise'])} | {r['verdict']} |" for r in rows]
    return lines


def review_markdown(base: str, params_diff: dict, metrics_diff: dict, old_noise: dict, new_noise: dict,
                    plots_dir: str | None = None) -> str:
    """The review comment: params changed, metric changes marked against noise, where the plots diff is."""
    out = [f"## Pipeline review against `{base}`", "", "### Params changed", ""]
    prows = [(path, key, ch.get("old"), ch.get("new")) for path, changes in params_diff.items()
             for key, ch in sorted((changes or {}).items())]
    if prows:
        out += [f"| file | param | {base} | workspace |", "|---|---|---|---|"]
        out += [f"| {p} | {k} | {_cell(o)} | {_cell(n)} |" for p, k, o, n in prows]
    else:
        out.append("No params changed.")
    rows = metric_rows(metrics_diff, old_noise, new_noise)
    count = {v: sum(r["verdict"] == v for r in rows) for v in
             ("**outside noise**", "inside noise", "no recorded noise", DET, "added/removed")}
    out += ["", "### Metrics changed", ""]
    if not rows:
        out.append("No metric changed.")
    else:
        out.append(f"{len(rows)} changed: {count['**outside noise**']} outside their recorded noise, "
                   f"{count['inside noise']} inside it, {count['no recorded noise']} with no recorded noise, "
                   f"{count[DET]} {DET}, "
                   f"{count['added/removed']} added or removed. A change is outside the noise when its size "
                   "exceeds the recorded 95% CI half-width, repeat-run half-range or noise floor, or for a share of "
                   "n items without a CI its Wilson 95% half-width (the larger of "
                   f"`{base}`'s and the workspace's); CI bounds are the noise column, not rows.")
        noisy = [r for r in rows if r["verdict"] in ("**outside noise**", "inside noise")]
        other = [r for r in rows if r not in noisy]
        if noisy:
            out += [""] + _table(noisy, base)
        if other:
            out += ["", f"<details><summary>{len(other)} changes without a recorded noise "
                        "(or added/removed)</summary>", ""] + _table(other, base) + ["", "</details>"]
    if plots_dir:
        out += ["", "### Plots", "", f"`dvc plots diff {base}` is in `{plots_dir}/index.html`: the data plots redrawn "
                "as PNGs and both revisions' image plots side by side, no scripts or network needed (open the file "
                "in any browser); files missing in a revision are listed at the top of the page."]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- CLI
def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise PipelineError(f"`{' '.join(cmd)}` failed: {last}")
    return proc.stdout


def _metrics_at(paths: list[str], rev: str | None) -> dict[str, Any]:
    """Parsed metrics files at a git revision (None = workspace); unreadable ones are left out."""
    out = {}
    for path in paths:
        if rev is None:
            p = Path(path)
            text = p.read_text() if p.is_file() else None
        else:
            proc = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
            text = proc.stdout if proc.returncode == 0 else None
        try:
            out[path] = json.loads(text) if text else None
        except json.JSONDecodeError:
            out[path] = None
    return {k: v for k, v in out.items() if v is not None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="main", help="git revision to compare the workspace with")
    ap.add_argument("--out", default="review", help="folder for review.md and the plots diff")
    ap.add_argument("--no-plots", action="store_true", help="skip the offline `dvc plots diff` page")
    ap.add_argument("--coverage", action="store_true",
                    help="list the workspace's metrics that have neither a noise nor a deterministic label, then stop")
    args = ap.parse_args(argv)
    try:
        if args.coverage:
            shown = json.loads(_run(["dvc", "metrics", "show", "--json"]) or "{}")
            files = sorted({p for rev in shown.values() for p in (rev.get("data") or {})} | {NOISE_FILE})
            metrics_now = _metrics_at(files, None)
            cov = coverage(metrics_now, noise_index(metrics_now))
            print("\n".join(cov["none"]))
            print(f"[review] {cov['metrics']} metrics: {cov['with_noise']} with recorded noise, "
                  f"{cov['deterministic']} deterministic by construction, {len(cov['none'])} with neither")
            return 0 if not cov["none"] else 1
        if subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}"],
                          capture_output=True).returncode != 0:
            raise PipelineError(f"--base {args.base}: not a commit in this repository; fetch it or name another")
        params = json.loads(_run(["dvc", "params", "diff", args.base, "--json"]) or "{}")
        metrics = json.loads(_run(["dvc", "metrics", "diff", args.base, "--json"]) or "{}")
        files = sorted(set(metrics) | {SUMMARY, NOISE_FILE} | {h.file for s in SECTIONS for h in s.headlines}
                       | {h.noise_file for s in SECTIONS for h in s.headlines if h.noise_file})
        old, new = noise_index(_metrics_at(files, args.base)), noise_index(_metrics_at(files, None))
        plots = None
        if not args.no_plots:
            plots = f"{args.out}/plots"
            review_plots.build(args.base, Path(plots))
        text = review_markdown(args.base, params, metrics, old, new, plots)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_text_atomic(Path(args.out) / "review.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Pull-request review: params and metrics diff against a base revision, each change read against the
run-to-run noise of that metric.

Why: a review compares two runs, and most moves on a small model are noise. The noise that decides is
how far the number moves between reruns, measured by the noise study (reporting/review/noise_study.py,
`make noise`): metrics/noise/<source>.json holds, per metric, one run's SD over reruns that change
that source only. Within-run figures (item-bootstrap CIs, the spread of 3 pretrain seeds) are never
used: they are about 4x smaller than whole-chain reruns.

Rule: a change between two runs is outside its band when |change| > t(0.975, n-1) x sqrt(2) x SD, the
95% band of the difference of two runs, widened by t because the SD comes from n runs. With hundreds of
keys judged at once, 5% of them fall outside their band by chance alone (an expectation that holds
however the keys move together), so the review says how many that is and marks **outside noise** only
the keys that stay outside after the false-discovery rate across the judged keys is controlled
(Benjamini-Hochberg at q = 0.05 on each key's two-sided t p-value, the p-value of that same band); the
others read "outside band, within chance". The claims (metrics/claims.json) control the family-wise error
over a handful of planned comparisons; a review screens hundreds of keys, where a false-discovery rate is
the matching control. Keys a changed param sets by construction (a metric that echoes the param, the
routing counts `s1mb.route_fraction` fixes: SET_BY_PARAM) are "set by the change", not findings. The source
(`--source auto`): a change confined to `rl` reads rl_seed; to `sft`/`lr_sweep`, sft_seed; to
`pretrain`, the larger of pretrain_init and pretrain_order; any other change, or none, reseed (the whole
chain). A metric whose SD is 0 over reruns is fixed by the inputs and params: any change is a change
of setup. Every metrics/**.json file is compared, not only the ones `dvc metrics diff` declares; the
report's headline numbers come first.

    python -m decision_pipeline review --base main --out review     # make review
    python -m decision_pipeline review --base main --recompute-base # make review RECOMPUTE=1: main rerun
                                                                    # here (review/rebase.py), not its committed metrics
    python -m decision_pipeline review --coverage                   # metrics with no recorded noise
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.reporting.review import plots_diff, rebase
from decision_pipeline.reporting.review.git_runs import metrics_at
from decision_pipeline.reporting.review.claims_file import claims_at, review_section
from decision_pipeline.reporting.review.noise_study import CLAIMS_FILE, NOISE_DIR, NOT_RUN_OUTPUTS
from decision_pipeline.reporting.report.sections import SECTIONS
from decision_pipeline.reporting.review.spread import check_noise_file, flatten_numbers

BOUND_KEYS = {"ci_low", "ci_high", "p2_5", "p97_5"}
OUT, IN, SETUP, NONE, ADDED = "**outside noise**", "inside noise", "fixed by the setup", "no recorded noise", "added/removed"
CHANCE, SET = "outside band, within chance", "set by the change"
ORDER = {OUT: 0, CHANCE: 1, IN: 2, SET: 3, SETUP: 4, NONE: 5, ADDED: 6}
LEGEND = {IN: "the change is inside the 95% band of two runs' difference (t(0.975, n-1) x sqrt(2) x sd)",
          OUT: "outside the band, and still after the false-discovery control across the judged keys "
               "(Benjamini-Hochberg, q = 0.05): a finding",
          CHANCE: "outside the band, but no more keys are outside than chance gives at this many keys",
          SET: "a key the changed param sets by construction (it echoes the param, or SET_BY_PARAM): not a finding"}
FDR_Q = 0.05          # the band's own level: at q = 0.05 one key alone reads as its 95% band
SOURCE_OF_SECTIONS = ({"rl"}, "rl_seed"), ({"sft", "lr_sweep"}, "sft_seed"), ({"pretrain"}, "pretrain")
# Metric keys ("file:key" patterns) a param moves by construction, whatever the model does: the share of
# questions S1MB routes to thinking fixes how many are routed, and so how many of those parse or are read
# after the chain (98 -> 66 at 0.3 -> 0.2). A metric that echoes a changed param is found without a pattern.
SET_BY_PARAM: dict[str, tuple[str, ...]] = {
    "s1mb.route_fraction": ("metrics/s1mb/*.json:routed_*",),
}


def _t975(n: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, n - 1))


def p_value(change: float, noise: dict) -> float:
    """Two-sided p of |change| against the difference of two runs with the recorded sd (t, n-1 df):
    below 0.05 exactly when the change is outside its band."""
    from scipy.stats import t

    return float(2 * t.sf(abs(change) / (math.sqrt(2) * noise["sd"]), noise["n"] - 1))


def bh_reject(pvalues: Sequence[float], q: float = FDR_Q) -> list[bool]:
    """Benjamini-Hochberg: reject the k smallest p-values, k the largest rank with p(k) <= k q / m."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    k = max((rank for rank, i in enumerate(order, start=1) if pvalues[i] <= rank * q / m), default=0)
    keep = set(order[:k])
    return [i in keep for i in range(m)]


def set_by(path: str, key: str, old: float | None, new: float | None, params_diff: dict) -> str | None:
    """The changed param that sets this metric by construction (SET_BY_PARAM, or the metric echoes it), or None."""
    where = f"{path}:{key}"
    for changes in (params_diff or {}).values():
        for name, ch in (changes or {}).items():
            if any(fnmatchcase(where, pattern) for pattern in SET_BY_PARAM.get(name, ())):
                return name
            po, pn = (ch or {}).get("old"), (ch or {}).get("new")
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (po, pn))
            if numeric and po != pn and old == po and new == pn:
                return name
    return None


def is_bound(key: str) -> bool:
    """A CI bound, a summary's noise entry or a seeds block's min/max/half-range: read beside its metric,
    not a row of its own."""
    parent, _, leaf = key.rpartition(".")
    return (leaf in BOUND_KEYS or leaf.endswith(("_ci_low", "_ci_high", "_noise", "_noise_n", "_noise_floor"))
            or (parent.rpartition(".")[2] == "seeds" and leaf.endswith(("_min", "_max", "_halfrange"))))


def choose_source(params_diff: dict, available: set[str]) -> str:
    """The noise source a change varies (module docstring); reseed when unsure or not measured."""
    sections = {key.split(".", 1)[0] for changes in params_diff.values() for key in (changes or {})}
    for group, source in SOURCE_OF_SECTIONS:
        if sections and sections <= group:
            wanted = ("pretrain_init", "pretrain_order") if source == "pretrain" else (source,)
            if all(w in available for w in wanted):
                return source
    return "reseed"


def bands(noise_files: dict[str, Any], source: str) -> dict[tuple[str, str], dict]:
    """{(file, key): {band, sd, n, source}}; `pretrain` takes the larger band of its two sources."""
    names = ("pretrain_init", "pretrain_order") if source == "pretrain" else (source,)
    out: dict[tuple[str, str], dict] = {}
    for name in names:
        doc = noise_files.get(f"{NOISE_DIR}/{name}.json") or {}
        for path, keys in (doc.get("spread") or {}).items():
            for key, s in keys.items():
                n, sd = int(s.get("n", 0)), float(s.get("sd", math.nan))
                if n < 2 or not math.isfinite(sd):
                    continue
                band = _t975(n) * math.sqrt(2) * sd
                if (path, key) not in out or band > out[(path, key)]["band"]:
                    out[(path, key)] = {"band": band, "sd": sd, "n": n, "source": name}
    return out


def diff_metrics(old: dict[str, Any], new: dict[str, Any]) -> dict[str, dict[str, dict]]:
    """Numeric leaves that differ between two {file: JSON} maps: {file: {key: {old, new, change}}}."""
    out: dict[str, dict[str, dict]] = {}
    for path in sorted(set(old) | set(new)):
        a, b = flatten_numbers(old.get(path) or {}), flatten_numbers(new.get(path) or {})
        changes = {}
        for key in sorted(set(a) | set(b)):
            va, vb = a.get(key), b.get(key)
            if va != vb:
                changes[key] = {"old": va, "new": vb, "change": None if va is None or vb is None else vb - va}
        if changes:
            out[path] = changes
    return out


def verdict(change: float | None, noise: dict | None) -> str:
    if change is None:
        return ADDED
    if noise is None:
        return NONE
    if noise["sd"] == 0:
        return SETUP
    return OUT if abs(change) > noise["band"] else IN


def metric_rows(diff: dict, noise: dict[tuple[str, str], dict], params_diff: dict | None = None) -> list[dict]:
    """One row per changed metric (CI bounds left out), findings first: keys a changed param sets are SET;
    of the keys judged against their noise, those outside their band are OUT only where the
    false-discovery control across all judged keys keeps them (`mark_judged`), else CHANCE."""
    rows = []
    for path, changes in diff.items():
        for key, ch in changes.items():
            if is_bound(key):
                continue
            nz = noise.get((path, key))
            param = set_by(path, key, ch["old"], ch["new"], params_diff or {}) if ch["change"] is not None else None
            rows.append({"file": path, "key": key, **ch, "noise": nz, "set_by": param,
                         "verdict": SET if param else verdict(ch["change"], nz)})
    mark_judged(rows)
    return sorted(rows, key=lambda r: (ORDER[r["verdict"]], r["file"], r["key"]))


def mark_judged(rows: list[dict]) -> None:
    """Give each row judged against its noise (OUT or IN by its band) its p-value, and keep OUT only for
    the keys Benjamini-Hochberg rejects across all judged rows; the rest outside their band become CHANCE."""
    judged = [r for r in rows if r["verdict"] in (OUT, IN)]
    for r in judged:
        r["p"] = p_value(r["change"], r["noise"])
    for r, kept in zip(judged, bh_reject([r["p"] for r in judged])):
        if r["verdict"] == OUT and not kept:
            r["verdict"] = CHANCE


def chance_summary(rows: list[dict]) -> str:
    """How many keys were judged against their noise, how many fell outside their band, what chance
    alone gives at that many keys, and how many stayed findings after the false-discovery control."""
    m = sum(r["verdict"] in (OUT, CHANCE, IN) for r in rows)
    if not m:
        return "No changed metric has a recorded run-to-run noise to be judged against."
    past = sum(r["verdict"] in (OUT, CHANCE) for r in rows)
    out = sum(r["verdict"] == OUT for r in rows)
    return (f"{m} changed metric(s) judged against their noise: {past} outside their 95% band, where chance alone "
            f"gives about {0.05 * m:.1f} (5% of {m}) if the change did nothing (the keys move together, so the "
            f"count by chance varies more than a binomial's). After controlling the false-discovery rate across "
            f"the {m} (Benjamini-Hochberg, q = {FDR_Q:g}), {out} remain: marked {OUT}; {past - out} read "
            f"\"{CHANCE}\".")


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return "—" if v is None else str(v).replace("|", "\\|")


def _noise_cell(nz: dict | None) -> str:
    return "—" if nz is None else f"±{nz['band']:.3g} (sd {nz['sd']:.3g}, n={nz['n']}, {nz['source']})"


def _table(rows: list[dict], base: str, label: bool = False) -> list[str]:
    first = "quantity" if label else "file | metric"
    head = f"| {first} | {base} | workspace | change | noise band | verdict |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        name = r["label"] if label else f"{r['file']} | {r['key']}"
        lines.append(f"| {name} | {_cell(r['old'])} | {_cell(r['new'])} | {_cell(r['change'])} | "
                     f"{_noise_cell(r['noise'])} | {r['verdict']} |")
    return lines


def headline_rows(rows: list[dict]) -> list[dict]:
    """The rows of the report's headline numbers (the README table), labelled, in the report's order."""
    by_key = {(r["file"], r["key"]): r for r in rows}
    out = []
    for sec in SECTIONS:
        for h in sec.headlines:
            for key in h.keys:
                if (h.file, key) in by_key:
                    out.append({**by_key[(h.file, key)], "label": h.label})
    return out


def review_markdown(base: str, params_diff: dict, diff: dict, noise: dict, source: str,
                    plots_dir: str | None = None, claims: list[str] | None = None) -> str:
    """The review comment: params changed, headline changes, every metric change against its noise, and
    (`claims`) the claims file's verdicts beside the base's."""
    out = [f"## Pipeline review against `{base}`", "", "### Params changed", ""]
    prows = [(path, key, ch.get("old"), ch.get("new")) for path, changes in params_diff.items()
             for key, ch in sorted((changes or {}).items())]
    if prows:
        out += [f"| file | param | {base} | workspace |", "|---|---|---|---|"]
        out += [f"| {p} | {k} | {_cell(o)} | {_cell(n)} |" for p, k, o, n in prows]
    else:
        out.append("No params changed.")
    rows = metric_rows(diff, noise, params_diff)
    count = {v: sum(r["verdict"] == v for r in rows) for v in ORDER}
    out += ["", "### Metrics changed", ""]
    if not noise:
        out.append(f"No run-to-run noise is recorded ({NOISE_DIR}/ is empty): run `make noise` on main first. "
                   "Until then no change can be told from noise.")
    if not rows:
        out.append("No metric changed.")
    else:
        out += _changes(rows, count, base, source)
    out += claims or []
    if plots_dir:
        out += ["", "### Plots", "", f"`dvc plots diff {base}` is in `{plots_dir}/index.html`: the data plots redrawn "
                "as PNGs and both revisions' image plots side by side, no scripts or network needed."]
    return "\n".join(out) + "\n"


def _changes(rows: list[dict], count: dict, base: str, source: str) -> list[str]:
    out = [f"{len(rows)} changed: {count[OUT]} {OUT} (findings), {count[CHANCE]} {CHANCE}, {count[IN]} {IN}, "
           f"{count[SET]} {SET}, {count[SETUP]} fixed by the setup (sd 0 over reruns: any change is a change of "
           f"setup), {count[NONE]} with no recorded noise, {count[ADDED]} added or removed. Noise source: "
           f"**{source}** ({NOISE_DIR}/).", "", chance_summary(rows), "", "Marks:", "",
           *(f"- {mark}: {text}" for mark, text in LEGEND.items())]
    heads = headline_rows(rows)
    if heads:
        out += ["", "#### Headline numbers (the README table)", ""] + _table(heads, base, label=True)
    noisy = [r for r in rows if r["verdict"] in (OUT, CHANCE, IN)]
    made = [r for r in rows if r["verdict"] == SET]
    other = [r for r in rows if r["verdict"] in (SETUP, NONE, ADDED)]
    if noisy:
        out += ["", "#### Every metric with a recorded noise", ""] + _table(noisy, base)
    if made:
        params = ", ".join(sorted({f"`{r['set_by']}`" for r in made}))
        out += ["", f"#### Set by the change: what {params} fixes by construction (not findings)", ""] + _table(made, base)
    if other:
        out += ["", f"<details><summary>{len(other)} changes fixed by the setup, without a recorded noise, "
                    "or added/removed</summary>", ""] + _table(other, base) + ["", "</details>"]
    return out


def coverage(metrics: dict[str, Any], noise: dict[tuple[str, str], dict]) -> dict[str, Any]:
    """Every numeric metric (not a CI bound) sorted into: with a run-to-run noise, or none."""
    out: dict[str, Any] = {"metrics": 0, "with_noise": 0, "none": []}
    for path, data in sorted(metrics.items()):
        for key in flatten_numbers(data):
            if is_bound(key):
                continue
            out["metrics"] += 1
            if (path, key) in noise:
                out["with_noise"] += 1
            else:
                out["none"].append(f"{path}:{key}")
    return out


# ---------------------------------------------------------------- CLI
def workspace_metrics(root: Path = Path(".")) -> dict[str, Any]:
    """Every metrics/**.json on disk (the noise files and other non-run outputs apart)."""
    out = {}
    for p in sorted((root / "metrics").rglob("*.json")):
        rel = p.relative_to(root).as_posix()
        if not rel.startswith(NOT_RUN_OUTPUTS):
            try:
                out[rel] = json.loads(p.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise PipelineError(f"{rel}: not valid UTF-8 JSON ({exc}); rerun the stage that writes it") from None
    return out


def noise_files(root: Path = Path(".")) -> dict[str, Any]:
    """Every metrics/noise/*.json, checked (spread.check_noise_file): a damaged one is one line naming it."""
    from decision_pipeline.common.textfile import read_text

    return {p.relative_to(root).as_posix(): check_noise_file(p.relative_to(root).as_posix(), read_text(p))
            for p in sorted((root / NOISE_DIR).glob("*.json"))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="main", help="git revision to compare the workspace with")
    ap.add_argument("--out", default="review", help="folder for review.md and the plots diff")
    ap.add_argument("--source", default="auto", help="noise source: auto, reseed, data, pretrain, sft_seed, rl_seed")
    ap.add_argument("--no-plots", action="store_true", help="skip the offline `dvc plots diff` page")
    ap.add_argument("--recompute-base", action="store_true",
                    help="reproduce --base here (a temporary worktree starting from this workspace's run, so only what differs "
                         "reruns) and compare "
                         "with its metrics instead of the committed ones, so another CPU's float drift is not a change")
    ap.add_argument("--coverage", action="store_true", help="list the metrics without a run-to-run noise, then stop")
    args = ap.parse_args(argv)
    try:
        nfiles = noise_files()
        if args.coverage:
            cov = coverage(workspace_metrics(), bands(nfiles, "reseed"))
            print("\n".join(cov["none"]))
            print(f"[review] {cov['metrics']} metrics: {cov['with_noise']} with a run-to-run noise, "
                  f"{len(cov['none'])} without")
            return 0 if not cov["none"] else 1
        if subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}"],
                          capture_output=True).returncode != 0:
            raise PipelineError(f"--base {args.base}: not a commit in this repository; fetch it or name another")
        proc = subprocess.run(["dvc", "params", "diff", args.base, "--json"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise PipelineError(f"dvc params diff {args.base}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
        params = json.loads(proc.stdout or "{}")
        available = {Path(p).stem for p in nfiles}
        source = choose_source(params, available) if args.source == "auto" else args.source
        needed = {"pretrain_init", "pretrain_order"} if source == "pretrain" else {source}
        if args.source != "auto" and not needed <= available:
            raise PipelineError(f"--source {source}: no {NOISE_DIR}/{source}.json recorded (have: "
                                f"{', '.join(sorted(available)) or 'none'}); pick one of those or run make noise")
        if args.recompute_base:
            base_metrics, counts = rebase.recompute(args.base, workspace_metrics)
            print(rebase.summary(args.base, counts), file=sys.stderr)
        else:
            base_metrics = metrics_at(args.base, NOT_RUN_OUTPUTS)
        diff = diff_metrics(base_metrics, workspace_metrics())
        plots = None
        if not args.no_plots:
            plots = f"{args.out}/plots"
            plots_diff.build(args.base, Path(plots))
        work = Path(CLAIMS_FILE)
        claims = review_section(args.base, claims_at(args.base, CLAIMS_FILE),
                                json.loads(work.read_text(encoding="utf-8")) if work.is_file() else None)
        text = review_markdown(args.base, params, diff, bands(nfiles, source), source, plots, claims)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_text_atomic(Path(args.out) / "review.md", text)
    print(text)
    return 0


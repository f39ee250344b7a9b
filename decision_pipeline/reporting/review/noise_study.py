"""Noise by source: how far every metric moves when one source of chance changes, and the claims
that survive it.

Why: a review compares two runs, so the noise that matters is run to run. The spread inside one run
(3 pretrain seeds, an item bootstrap) is about 4x smaller than whole-chain reruns. This queues DVC
experiments from the committed run, each changing exactly one source of chance, and reads them back:

    python -m decision_pipeline noise-study --plan [--runs reseed=6 sft_seed=3 ...]
    python -m decision_pipeline noise-study --run      # each run: dvc exp run --temp (make noise: all three)
    python -m decision_pipeline noise-study --collect

`--run` runs the planned experiments one after another with `dvc exp run --temp` (no queue worker to
die mid-study) and skips those that already have results, so a study stopped part-way resumes where it
stopped. `--queue` puts them on DVC's queue instead (`dvc exp run --run-all` or `dvc queue start`).

Sources (SOURCES): `reseed` (base.seed: everything), `data` (the generated questions and documents),
`pretrain_init`, `pretrain_order`, `sft_seed`, `rl_seed`, `curate_seed`. A run reruns only the stages
downstream of what it changes. `--extend SOURCE=N` adds a source to a study planned at an earlier commit:
its runs start from HEAD, which must hold the same committed run (every claim's value equal), and are
paired with the study's baseline like the others. `--collect` writes, all or nothing:
- metrics/noise/<source>.json: per metrics file and key, over the baseline and the source's runs,
  n, sd, halfrange and mean (spread.py); `--finished-only` collects a study stopped part-way and names
  the planned runs it lacks (`not_run`);
- metrics/claims.json: the research's comparisons (CLAIMS) with one paired difference per
  whole-chain run (baseline + reseeds) and the verdict of common/verdict.py (>= 5 runs, Holm over the
  family); `--rejudge` recomputes those verdicts from the file's own per-run values (claims_file.py);
- metrics/noise/by_source.json: the SD of each claim's difference over each source's runs.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.common.verdict import N_MIN
from decision_pipeline.reporting.review.claims_file import NOISE_SOURCE, header, judge_family, rejudge_file
from decision_pipeline.reporting.review.git_runs import exp_refs, metrics_at, params_at
from decision_pipeline.reporting.review.noise_manifest import check_replace, read_manifest
from decision_pipeline.reporting.review.spread import describe, flatten_numbers, spreads

NOISE_DIR = "metrics/noise"
CLAIMS_FILE = "metrics/claims.json"
PREFIX = "noise-"
MANIFEST = ".dvc/tmp/noise_study.json"
#: files under metrics/ that are not outputs of one pipeline run
NOT_RUN_OUTPUTS = ("metrics/noise/", CLAIMS_FILE, "metrics/curate_ablation.json", "metrics/rl_ablation.json",
                   "metrics/sft_ablation.json",
                   "metrics/perf/")


@dataclass(frozen=True)
class Source:
    """One source of chance and the params that change it alone (run i = 1, 2, ...)."""
    varies: str
    overrides: Callable[[Mapping[str, Any], int], dict[str, Any]]


SOURCES: dict[str, Source] = {
    "reseed": Source("base.seed: every seeded step of the chain (data, pretraining, sampling, SFT, RL, annotation)",
                     lambda p, i: {"base.seed": int(p["base"]["seed"]) + i}),
    "data": Source("items.seed_offset and ingest.seed_offset: the generated questions and documents",
                   lambda p, i: {"items.seed_offset": i, "ingest.seed_offset": i}),
    "pretrain_init": Source("pretrain.init_offset: the small GPT's initialisation (every arm, every seed)",
                            lambda p, i: {"pretrain.init_offset": 1000 * i}),
    "pretrain_order": Source("pretrain.order_offset: the pretraining document and window order",
                             lambda p, i: {"pretrain.order_offset": 1000 * i}),
    "sft_seed": Source("sft.seed_offset: SFT's data order and LoRA initialisation (and the stages after it)",
                       lambda p, i: {"sft.seed_offset": i}),
    "rl_seed": Source("rl.seed_offset: GRPO's sampling and order (and the stages after it)",
                      lambda p, i: {"rl.seed_offset": i}),
    "curate_seed": Source("curate.seed_offset: curation's own seed (register classifier, MinHash, calibration "
                          "sample, the random arms' draws) and everything after it",
                          lambda p, i: {"curate.seed_offset": i}),
}
#: runs per source, the baseline included (reseed: 5 reruns + the committed run); the plan runs them in
#: this order, the whole-chain reseeds (which the claims need) first, then the cheap partial chains
DEFAULT_RUNS = {"reseed": 6, "rl_seed": 3, "sft_seed": 3, "pretrain_init": 2, "pretrain_order": 2, "data": 2,
                "curate_seed": 2}


@dataclass(frozen=True)
class Claim:
    """A comparison of the research, read as one paired difference per whole-chain run."""
    label: str
    terms: tuple[tuple[str, str, float], ...]  # (metrics file, key, sign): the difference is the signed sum


def _c(label: str, *terms: tuple[str, str, float]) -> Claim:
    return Claim(label, tuple(terms))


EV, PT = "metrics/evaluate/", "metrics/pretrain/compare.json"
CLAIMS: dict[str, Claim] = {
    "curated_vs_filtered_random_ppl": _c("curated − filtered_random held-out ppl (lower is better)",
                                         (PT, "vs_filtered_random.ppl.diff", 1)),
    "curated_vs_random_ppl": _c("curated − random held-out ppl (lower is better)", (PT, "vs_random.ppl.diff", 1)),
    "curated_vs_random_ppl_equal_registers": _c("curated − random held-out ppl, registers weighted equally",
                                                (PT, "vs_random.ppl_equal_registers.diff", 1)),
    "sft_vs_base_readout": _c("SFT − base readout accuracy", (EV + "sft.json", "vs_base.readout_accuracy.diff", 1)),
    "sft_vs_base_thinking": _c("SFT − base thinking accuracy", (EV + "sft.json", "vs_base.thinking_accuracy.diff", 1)),
    "sft_routed_vs_readout": _c("SFT routed (30% to thinking) − SFT readout accuracy",
                                (EV + "sft.json", "cis.routed_accuracy_at_0.3.point", 1),
                                (EV + "sft.json", "cis.readout_accuracy.point", -1)),
    "sft_margin_vs_learned_router": _c("SFT margin − learned router AUROC for 'thinking fixes the readout'",
                                       (EV + "sft.json", "router.margin.fixable_auroc", 1),
                                       (EV + "sft.json", "router.learned.fixable_auroc", -1)),
    "sft_decision_score_vs_prior": _c("SFT Brier skill over the label prior",
                                      (EV + "sft.json", "decision_score.brier_skill.point", 1)),
    "sft_vs_base_s1mb": _c("SFT − base S1MB Task Avg", ("metrics/s1mb/sft.json", "task_avg", 1),
                           ("metrics/s1mb/base.json", "task_avg", -1)),
    "rl_reward_gain": _c("RL training reward, last − first quarter", ("metrics/rl.json", "reward_gain.diff", 1)),
    "rl_vs_sft_thinking": _c("RL − SFT thinking accuracy", (EV + "rl.json", "vs_sft.thinking_accuracy.diff", 1)),
    "rl_vs_sft_readout": _c("RL − SFT readout accuracy", (EV + "rl.json", "vs_sft.readout_accuracy.diff", 1)),
    "rl_top_answer_vs_gold_share": _c("RL last round: top answer's share − the top gold index's share (collapse)",
                                      ("metrics/rl.json", "answer_collapse_last.top_answer_share", 1),
                                      ("metrics/rl.json", "answer_collapse_last.top_gold_share", -1)),
}


def parse_runs(items: Sequence[str]) -> dict[str, int]:
    """`source=n` pairs over the defaults; n counts the baseline, so a spread needs n >= 2 (0 leaves the
    source out of this study)."""
    runs = dict(DEFAULT_RUNS)
    for item in items:
        name, sep, value = item.partition("=")
        if name not in SOURCES or not sep or not value.strip().isdigit():
            raise PipelineError(f"--runs {item}: expected SOURCE=N with SOURCE one of {', '.join(SOURCES)}")
        runs[name] = int(value)
    short = [f"{k}={v}" for k, v in runs.items() if v == 1]
    if short:
        raise PipelineError(f"--runs {' '.join(short)}: a spread needs >= 2 runs per source (the committed run "
                            "and >= 1 rerun); raise N, or write 0 to leave the source out")
    return runs


def plan(params: Mapping[str, Any], runs: Mapping[str, int]) -> dict[str, dict]:
    """{experiment name: {source, overrides}} for runs 1..n-1 of every source."""
    return {f"{PREFIX}{name}-{i}": {"source": name, "overrides": SOURCES[name].overrides(params, i)}
            for name, n in runs.items() for i in range(1, n)}


def queue_command(name: str, overrides: Mapping[str, Any]) -> list[str]:
    return ["dvc", "exp", "run", "--queue", "--name", name, *[a for k, v in overrides.items() for a in ("-S", f"{k}={v}")]]


def _flat_params(p: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in p.items():
        if isinstance(v, Mapping):
            out.update({f"{k}.{kk}": vv for kk, vv in _flat_params(v).items()})
        else:
            out[k] = v
    return out


def check_params(name: str, expected: Mapping[str, Any], base: Mapping[str, Any], run: Mapping[str, Any]) -> None:
    """A run may differ from the baseline in its source's overrides only."""
    b, r = _flat_params(base), _flat_params(run)
    diff = {k: r.get(k) for k in set(b) | set(r) if b.get(k) != r.get(k)}
    if diff != dict(expected):
        extra = sorted(set(diff) ^ set(expected))
        raise PipelineError(f"noise study: run {name} changes {', '.join(extra) or 'other values of ' + str(dict(expected))} "
                            f"beside/instead of {dict(expected)}; remove it (dvc exp remove {name}) and queue again "
                            "from the committed state")


def claim_value(claim: Claim, metrics: Mapping[str, Any]) -> float | None:
    total = 0.0
    for path, key, sign in claim.terms:
        v = flatten_numbers(metrics.get(path) or {}).get(key)
        if v is None:
            return None
        total += sign * v
    return total


def claims(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict:
    """metrics/claims.json: each claim's per-run paired difference over the whole-chain runs, judged by
    common/verdict.py against the run-to-run SD of that difference, the family on its Holm-adjusted p.
    A claim whose metric fewer than 2 runs carry is not judged (`not_judged` says why), never a verdict."""
    entries, skipped = {}, {}
    for key, claim in CLAIMS.items():
        values = [claim_value(claim, r) for r in runs]
        kept = [x for x in values if x is not None]
        if len(kept) < 2:
            skipped[key] = f"its metric is in {len(kept)} of the {len(runs)} whole-chain runs; a verdict needs >= 2"
            continue
        entries[key] = {"label": claim.label, "per_run": kept, "noise_source": NOISE_SOURCE,
                        "metric": " ".join(f"{'+' if s > 0 else '−'}{p}:{k}" for p, k, s in claim.terms),
                        "runs": [n for n, x in zip(names, values) if x is not None]}
    out = judge_family(entries)
    return {**header(N_MIN, len(out)), "not_judged": skipped, "comparisons": out}


def claims_by_source(by_source: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]],
                     not_run: Mapping[str, Sequence[str]]) -> dict:
    """metrics/noise/by_source.json: each claim's paired difference, its SD over each source's runs (the
    baseline included), so a reader sees which source of chance its whole-chain noise comes from. A source
    with the baseline alone has sd null ("n/a" in the docs), not 0."""
    out: dict[str, dict] = {}
    for key, claim in CLAIMS.items():
        row: dict[str, Any] = {"label": claim.label}
        for source, runs in by_source.items():
            values = [v for v in (claim_value(claim, m) for _, m in runs) if v is not None]
            d = describe(values) if values else {"n": 0}
            row[source] = {**d, "sd": d["sd"] if len(values) > 1 else None}
        out[key] = row
    return {"sources": {s: {"varies": SOURCES[s].varies, "n": len(r), "runs": [n for n, _ in r],
                            "not_run": list(not_run.get(s, ()))} for s, r in by_source.items()}, "claims": out}


def collect(manifest: Mapping[str, Any], finished_only: bool = False) -> dict[str, dict]:
    """Every file `--collect` writes ({path: content}), computed before anything is written.

    `finished_only`: planned runs without results are left out and named in each file's `not_run`
    (a study stopped part-way, reported as what it is) instead of failing the collection."""
    baseline = manifest["baseline"]
    base_params = params_at(baseline)
    base_metrics = metrics_at(baseline, NOT_RUN_OUTPUTS)
    by_source: dict[str, list[tuple[str, dict]]] = {name: [("baseline", base_metrics)] for name in SOURCES}
    not_run: dict[str, list[str]] = {name: [] for name in SOURCES}
    for name, entry in sorted(manifest["runs"].items()):
        start = entry.get("baseline", baseline)   # --extend: started from a later commit holding the same run
        refs = exp_refs(start)
        if name not in refs and finished_only:
            not_run[entry["source"]].append(name)
            continue
        if name not in refs:
            cmd = " ".join(queue_command(name, entry["overrides"]))
            raise PipelineError(f"noise study: run {name} has no results here (failed, not run, or run in another "
                                f"clone: `dvc exp pull origin {name}` fetches a pushed run; see `dvc queue status`); "
                                f"rerun it (`{cmd}` then `dvc exp run --run-all`) or drop it from {MANIFEST}")
        check_params(name, entry["overrides"], base_params if start == baseline else params_at(start),
                     params_at(refs[name]))
        by_source[entry["source"]].append((name, metrics_at(refs[name], NOT_RUN_OUTPUTS)))
    files: dict[str, dict] = {}
    for source, runs in by_source.items():
        if len(runs) < 2:
            continue
        files[f"{NOISE_DIR}/{source}.json"] = {
            "source": source, "varies": SOURCES[source].varies, "baseline": baseline,
            "runs": [n for n, _ in runs], "n": len(runs), "not_run": not_run[source],
            "spread": spreads([m for _, m in runs])}
    if f"{NOISE_DIR}/reseed.json" not in files:
        raise PipelineError("noise study: no reseed run has results; the whole-chain noise and the claims need them "
                            "(queue with --runs reseed=6)")
    files[f"{NOISE_DIR}/by_source.json"] = claims_by_source(by_source, not_run)
    reseed = by_source["reseed"]
    files[CLAIMS_FILE] = {"baseline": baseline, "not_run": not_run["reseed"],
                          **claims([m for _, m in reseed], [n for n, _ in reseed])}
    return files


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def _require_committed() -> None:
    """Runs start from the committed state: uncommitted edits would not be in them."""
    if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                      text=True).stdout.strip():
        raise PipelineError("noise study: the workspace has uncommitted changes; the runs start from the "
                            "committed state, so commit (or stash) first")


def extend(manifest: Mapping[str, Any], runs: Mapping[str, int], head: str) -> dict:
    """The manifest with `runs` of new sources started from `head`, after checking that `head` holds the
    study baseline's run (every claim's value equal), so its runs pair with the baseline like the others."""
    baseline = manifest["baseline"]
    known = {e["source"] for e in manifest["runs"].values()}
    again = sorted(set(runs) & known)
    if again:
        raise PipelineError(f"--extend {' '.join(again)}: already in the study of {MANIFEST}; extend with a new "
                            "source, or plan a new study (--plan)")
    if head != baseline:
        base_m, head_m = metrics_at(baseline, NOT_RUN_OUTPUTS), metrics_at(head, NOT_RUN_OUTPUTS)
        for key, claim in CLAIMS.items():
            a, b = claim_value(claim, base_m), claim_value(claim, head_m)
            if a != b:
                raise PipelineError(f"--extend: HEAD {head[:12]} does not hold the study's run ({key}: {b} here, {a} "
                                    f"at {baseline[:12]}); extend from a commit whose committed run is the study's, "
                                    "or plan a new study (--plan)")
    todo = plan(params_at(head), runs)
    if not todo:
        raise PipelineError(f"--extend {' '.join(f'{k}={v}' for k, v in runs.items())}: no run to add (N counts the "
                            "study's baseline, so N >= 2 adds N - 1 runs)")
    return {**manifest, "runs": {**manifest["runs"], **{n: {**e, "baseline": head} for n, e in todo.items()}}}


def run_planned() -> int:
    """Run every planned experiment without results, one at a time (`dvc exp run --temp`); 2 if any failed."""
    manifest = read_manifest(MANIFEST, SOURCES, "no planned noise study; plan one first (--plan)")
    head = _head()
    here = {n: e for n, e in manifest["runs"].items() if e.get("baseline", manifest["baseline"]) == head}
    if not here:
        raise PipelineError(f"{MANIFEST}: planned from {manifest['baseline'][:12]} but HEAD is {head[:12]}; check "
                            "that commit out, or plan again from this one (--plan)")
    failed = []
    for name, entry in here.items():
        if name in exp_refs(head):
            print(f"[noise_study] {name}: has results, skipped")
            continue
        cmd = ["dvc", "exp", "run", "--temp", "--name", name,
               *[a for k, v in entry["overrides"].items() for a in ("-S", f"{k}={v}")]]
        print(f"[noise_study] {name}: {' '.join(cmd)}", flush=True)
        if subprocess.run(cmd).returncode != 0:
            failed.append(name)
    if failed:
        print(f"error: noise study: {', '.join(failed)} failed; see their output above, fix the cause and run --run "
              "again (finished runs are skipped)", file=sys.stderr)
        return 2
    return 0


def write_all(files: Mapping[str, dict], root: Path = Path(".")) -> None:
    for path, content in files.items():
        write_text_atomic(root / path, json.dumps(content, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", action="store_true", help=f"record the runs in {MANIFEST} (from the committed state)")
    ap.add_argument("--queue", action="store_true", help="plan, then queue one DVC experiment per rerun")
    ap.add_argument("--run", action="store_true", help=f"run the planned runs of {MANIFEST} that have no results yet")
    ap.add_argument("--runs", nargs="*", default=[], metavar="SOURCE=N",
                    help=f"runs per source, the committed run included (defaults {DEFAULT_RUNS})")
    ap.add_argument("--extend", nargs="+", default=None, metavar="SOURCE=N",
                    help=f"add sources to the study in {MANIFEST}, their runs started from HEAD")
    ap.add_argument("--replace", action="store_true",
                    help=f"with --plan: write the new plan over another study recorded in {MANIFEST}")
    ap.add_argument("--collect", action="store_true", help=f"read the runs back into {NOISE_DIR}/ and {CLAIMS_FILE}")
    ap.add_argument("--rejudge", action="store_true",
                    help=f"recompute every verdict of {CLAIMS_FILE} from its per-run values (Holm over the family)")
    ap.add_argument("--finished-only", action="store_true",
                    help="with --collect: leave out planned runs that have no results (named in each file's not_run)")
    args = ap.parse_args(argv)
    try:
        if args.rejudge:
            out = rejudge_file(Path(CLAIMS_FILE))
            found = sum(c["detected"] for c in out["comparisons"].values())
            print(f"[noise_study] {CLAIMS_FILE}: {len(out['comparisons'])} comparisons rejudged, {found} detected "
                  f"after Holm's correction")
            return 0
        if args.collect:
            manifest = read_manifest(MANIFEST, SOURCES, "no planned noise study; plan and run one first (make noise)")
            files = collect(manifest, args.finished_only)
            write_all(files)
            for path, content in sorted(files.items()):
                if "comparisons" in content:
                    runs = max((c["n"] for c in content["comparisons"].values()), default=0)
                    print(f"[noise_study] {path}: {len(content['comparisons'])} comparisons over {runs} whole-chain runs")
                elif "claims" in content:
                    measured = ", ".join(f"{k} {v['n']}" for k, v in content["sources"].items() if v["n"] > 1)
                    print(f"[noise_study] {path}: {len(content['claims'])} comparisons' SD per source (runs: {measured})")
                else:
                    size = sum(len(v) for v in content["spread"].values())
                    print(f"[noise_study] {path}: {size} metric values over {content['n']} runs")
            return 0
        if args.run:
            return run_planned()
        if args.extend:
            old = read_manifest(MANIFEST, SOURCES, "no planned noise study to extend; plan one first (--plan)")
            wanted = {k: v for k, v in parse_runs(args.extend).items()
                      if any(item.partition("=")[0] == k for item in args.extend)}
            _require_committed()
            manifest = extend(old, wanted, _head())
            write_text_atomic(Path(MANIFEST), json.dumps(manifest, indent=1) + "\n")
            for name, entry in manifest["runs"].items():
                if entry["source"] in wanted:
                    print(" ".join(queue_command(name, entry["overrides"])))
            return 0
        runs = parse_runs(args.runs)
        head = _head()
        todo = plan(params_at(head), runs)
        if args.plan or args.queue:
            _require_committed()
            check_replace(MANIFEST, {"baseline": head, "runs": todo}, SOURCES, args.replace)
            write_text_atomic(Path(MANIFEST), json.dumps({"baseline": head, "runs": todo}, indent=1) + "\n")
            for name, entry in todo.items() if args.queue else ():
                subprocess.run(queue_command(name, entry["overrides"]), check=True)
        for name, entry in todo.items():
            print(" ".join(queue_command(name, entry["overrides"])))
    except (PipelineError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


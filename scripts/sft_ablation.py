"""The research's SFT ablation, gold-only vs vote-mix readout targets, as DVC experiments (issue 35, item 7).

    python scripts/sft_ablation.py                    # print the commands (dry run)
    python scripts/sft_ablation.py --queue            # queue them: dvc exp run --queue -S sft.target_mode=... evaluate@sft
    dvc exp run --run-all --jobs 1                    # run the queue (each: lr_sweep, sft, calibrate@sft, evaluate@sft)
    python scripts/sft_ablation.py --collect          # the experiments' git trees -> metrics/sft_ablation.json
    python scripts/sft_ablation.py --seeds 1 2 3 4 --seeded-modes gold_onehot --queue   # paired seeds
    python scripts/sft_ablation.py --seeds 1 2 3 4 --seeded-modes gold_onehot --collect

`sft.target_mode` (decision/sft/data.py) names the readout targets: `vote_mix` is the research's rule and
the default (alpha x gold + (1 - alpha) x the model's own chain votes), so it is the committed run, read
from the baseline commit; `gold_only` (the item's gold target alone) and `gold_onehot` (one-hot at the
gold) are one queued experiment each. An experiment reruns what the mode reaches on the way to
`evaluate@sft` (the sweep, SFT, its calibration and evaluation): over half of a default run.

The modes are compared on dev (`metrics/sft.json:dev`, SFT's own held-out readout check); the eval
numbers (`metrics/evaluate/sft.json`) are recorded beside them, unpaired, and the default stays the
research's rule whatever they say. The collect writes nothing unless every mode has a finished run from
the baseline that differs from the committed run in `sft.target_mode` alone: anything else is one line
naming it, exit 2. Where no readout target carried a model vote (the default profile's base model
writes no chain that parses), vote_mix and gold_only trained on the same targets, and the table says
so. Only the grid and the commands live here; the runs are DVC's.

Why seeds: one run per rule is no verdict (a +0.10 eval lead at SFT seed 0 vanished at seeds 1 and 2).
`--seeds K...` adds, per extra `sft.seed_offset` K, a vote_mix run (`sft-target-vote-mix-sK`) and one per
`--seeded-modes` mode (`sft-target-<mode>-sK`), each differing from the committed run in
`sft.target_mode` and `sft.seed_offset` alone. The collect pairs each mode with the vote mix seed by
seed (seed 0 is the committed run) and judges the differences with common/verdict.py: with fewer than
5 seeds in all a comparison says "not tested".
"""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_json
from decision_pipeline.common.verdict import seed_verdict
from decision_pipeline.decision.sft.config import TARGET_MODES
from decision_pipeline.reporting.review.git_runs import exp_refs, first_difference, metrics_at, params_at

SCRIPT = "scripts/sft_ablation.py"
TARGET = "evaluate@sft"
PREFIX = "sft-target-"
RULE = "vote_mix"                                    # the research's rule: the committed run
ABLATED = tuple(m for m in TARGET_MODES if m != RULE)
SFT = "metrics/sft.json"
EVAL = "metrics/evaluate/sft.json"
NEEDED = ((SFT, "dev.accuracy"), (SFT, "readout_targets.total"), (EVAL, "cis.readout_accuracy.point"))


PAIRED = {"dev_accuracy": "dev.accuracy", "dev_nll": "dev.nll", "eval_readout_accuracy": "eval.readout_accuracy.point",
          "eval_thinking_accuracy": "eval.thinking_accuracy.point", "eval_brier_skill": "eval.brier_skill.point"}


def exp_name(mode: str, seed: int = 0) -> str:
    """The experiment's name (a git ref part): `sft-target-gold-only`, `sft-target-vote-mix-s3`."""
    return PREFIX + mode.replace("_", "-") + (f"-s{seed}" if seed else "")


def check_seeds(seeds: Sequence[int], seeded_modes: Sequence[str], modes: Sequence[str]) -> tuple[list[int], list[str]]:
    """The extra SFT seeds and the modes they apply to, or one line naming the bad value."""
    if any(k < 1 for k in seeds) or len(set(seeds)) != len(seeds):
        raise PipelineError(f"{SCRIPT}: --seeds {' '.join(map(str, seeds))}: give each extra sft.seed_offset once, "
                            "each >= 1 (seed 0 is the committed run)")
    for m in seeded_modes:
        if m not in modes:
            raise PipelineError(f"{SCRIPT}: --seeded-modes {m} is not among --modes ({', '.join(modes)})")
    return list(seeds), list(seeded_modes)


def check_modes(modes: Sequence[str]) -> list[str]:
    """The ablated modes as given, or one line naming the bad value."""
    for m in modes:
        if m == RULE:
            raise PipelineError(f"{SCRIPT}: --modes {RULE}: the research's rule is the committed run (the baseline), "
                                f"not an experiment; give the ablated modes ({', '.join(ABLATED)})")
        if m not in TARGET_MODES:
            raise PipelineError(f"{SCRIPT}: --modes {m} is not an sft.target_mode; use {', '.join(ABLATED)}")
    if not modes or len(set(modes)) != len(modes):
        raise PipelineError(f"{SCRIPT}: --modes {' '.join(modes)}: give each ablated mode once")
    return list(modes)


def commands(modes: Sequence[str] = ABLATED, seeds: Sequence[int] = (),
             seeded_modes: Sequence[str] | None = None) -> list[list[str]]:
    """One `dvc exp run --queue` per ablated mode, then per extra seed the vote mix and each seeded mode,
    named so the collect can find them."""
    cmds = [["dvc", "exp", "run", "--queue", "--name", exp_name(m), "-S", f"sft.target_mode={m}", TARGET]
            for m in modes]
    for k in seeds:
        for m in (RULE, *(modes if seeded_modes is None else seeded_modes)):
            cmds.append(["dvc", "exp", "run", "--queue", "--name", exp_name(m, k), "-S", f"sft.target_mode={m}",
                         "-S", f"sft.seed_offset={k}", TARGET])
    return cmds


def _get(tree: Any, key: str) -> Any:
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def row(name: str, mode: str, params: dict, metrics: dict, fix: str) -> dict:
    """One mode's results, or one line naming what its run lacks and `fix`, what to do about it."""
    if _get(params, "sft.target_mode") != mode:
        raise PipelineError(f"{SCRIPT}: {name} ran with sft.target_mode={_get(params, 'sft.target_mode')!r}, not "
                            f"{mode}; {fix}")
    for path, key in NEEDED:
        if _get(metrics.get(path), key) is None:
            raise PipelineError(f"{SCRIPT}: {name} has no {path}:{key} (it did not finish {TARGET}); {fix}")
    sft, ev = metrics[SFT], metrics[EVAL]
    ci = lambda key: {k: _get(ev, f"{key}.{k}") for k in ("point", "ci_low", "ci_high")}  # noqa: E731
    return {"run": name, "mode": mode, "alpha": _get(params, "sft.alpha"), "chosen_lr": sft.get("chosen_lr"),
            "readout_targets": sft["readout_targets"],
            "dev": {k: _get(sft, f"dev.{k}") for k in ("accuracy", "nll", "ece", "n")},
            "eval": {"n": ev.get("n_items"), "readout_accuracy": ci("cis.readout_accuracy"),
                     "thinking_accuracy": ci("cis.thinking_accuracy"), "brier_skill": ci("decision_score.brier_skill"),
                     "ece_calibrated": ev.get("ece_calibrated")}}


def _unvaried(params: dict) -> dict:
    """The params with what an ablation run may vary (target mode, SFT seed) blanked."""
    return {**params, "sft": {**params.get("sft", {}), "target_mode": None, "seed_offset": None}}


def _experiment(refs: dict[str, str], baseline: str, base_params: dict, mode: str, seed: int) -> dict:
    """One experiment's row, or one line naming what is missing or confounded."""
    name = exp_name(mode, seed)
    if name not in refs:
        raise PipelineError(f"{SCRIPT}: {name} has no results from {baseline[:12]} (queued, running, failed or "
                            f"not queued: `dvc queue status`); queue it ({SCRIPT} --queue), run "
                            "`dvc exp run --run-all`, then collect again")
    params = params_at(refs[name])
    other = first_difference(_unvaried(params), _unvaried(base_params))
    got_seed = _get(params, "sft.seed_offset") or 0
    if other or got_seed != seed + (_get(base_params, "sft.seed_offset") or 0):
        raise PipelineError(f"{SCRIPT}: {name} differs from the committed run in {other or 'sft.seed_offset'}, not "
                            f"only in sft.target_mode{' and sft.seed_offset' if seed else ''}; remove it "
                            f"(dvc exp remove {name}) and queue it again")
    return {**row(name, mode, params, metrics_at(refs[name]),
                  f"remove it (dvc exp remove {name}), queue it again and collect again"), "seed": seed}


def paired(rows: Sequence[dict], mode: str) -> dict:
    """`mode` minus the vote mix, seed by seed, per compared number, each with its verdict."""
    by_seed = {(r["mode"], r["seed"]): r for r in rows}
    seeds = sorted(k for (m, k) in by_seed if m == mode and (RULE, k) in by_seed)
    out: dict = {"seeds": seeds}
    for label, key in PAIRED.items():
        out[label] = seed_verdict([_get(by_seed[(mode, k)], key) - _get(by_seed[(RULE, k)], key) for k in seeds],
                                  noise_source="sd of the paired differences over SFT seeds")
    return out


def collect(baseline: str, modes: Sequence[str] = ABLATED, seeds: Sequence[int] = (),
            seeded_modes: Sequence[str] | None = None) -> dict:
    """The results table: the committed run (vote_mix) and one experiment per ablated mode run from
    `baseline`, plus per extra seed the vote mix and the seeded modes, paired seed by seed; a missing,
    unfinished or confounded run is a PipelineError of one line."""
    base_params = params_at(baseline)
    rows = [{**row(f"the committed run {baseline[:12]}", RULE, base_params, metrics_at(baseline),
                   "collect against a commit whose run used the research's rule (--baseline)"), "seed": 0}]
    refs = exp_refs(baseline)
    rows += [_experiment(refs, baseline, base_params, mode, 0) for mode in modes]
    seeded = list(modes if seeded_modes is None else seeded_modes) if seeds else []
    seed_rows = [_experiment(refs, baseline, base_params, m, k) for k in seeds for m in (RULE, *seeded)]
    votes = rows[0]["readout_targets"].get("with_model_votes", 0)
    return {"source": f"the committed run {baseline[:12]} ({RULE}) and experiments {PREFIX}<mode> run from it "
                      "(git trees)", "target": TARGET,
            "read_on": f"dev ({SFT}:dev) to compare the modes; eval ({EVAL}, unpaired CIs) recorded beside it; "
                       f"the default stays the research's {RULE}",
            "votes_present": bool(votes),
            "note": None if votes else (f"no readout target of the {RULE} run carried a model vote (the base model's "
                                        "chains did not parse), so vote_mix and gold_only trained on the same "
                                        "targets: this run cannot separate them"),
            "rows": rows,
            **({"seed_rows": seed_rows, "paired": {m: paired(rows + seed_rows, m) for m in seeded}} if seeds else {})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queue", action="store_true", help="run the `dvc exp run --queue` commands")
    ap.add_argument("--modes", nargs="+", default=list(ABLATED), help=f"ablated modes, of {', '.join(ABLATED)}")
    ap.add_argument("--baseline", default="HEAD", help="the commit the experiments were queued from")
    ap.add_argument("--seeds", nargs="*", type=int, default=[], help="extra sft.seed_offset values (each >= 1)")
    ap.add_argument("--seeded-modes", nargs="*", default=None, help="modes run at --seeds (default: --modes)")
    ap.add_argument("--collect", action="store_true", help="read the runs back into --out")
    ap.add_argument("--out", default="metrics/sft_ablation.json")
    args = ap.parse_args(argv)
    try:
        modes = check_modes(args.modes)
        seeds, seeded = check_seeds(args.seeds, modes if args.seeded_modes is None else args.seeded_modes, modes)
        if args.collect:
            baseline = subprocess.run(["git", "rev-parse", args.baseline], capture_output=True, text=True,
                                      check=True).stdout.strip()
            table = collect(baseline, modes, seeds, seeded)
            write_json(args.out, table)
            n = len(table["rows"]) + len(table.get("seed_rows", []))
            verdicts = "".join(f"; {m} − {RULE} eval readout {v['eval_readout_accuracy']['diff']:+.3f} over "
                               f"{v['eval_readout_accuracy']['n']} seeds: {v['eval_readout_accuracy']['verdict']}"
                               for m, v in table.get("paired", {}).items())
            print(f"{args.out}: {n} runs{verdicts}" + ("" if table["votes_present"] else f"; {table['note']}"))
            return 0
        for cmd in commands(modes, seeds, seeded):
            print(shlex.join(cmd))
            if args.queue:
                subprocess.run(cmd, check=True)
    except PipelineError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"{SCRIPT}: {shlex.join(exc.cmd)} exited {exc.returncode}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

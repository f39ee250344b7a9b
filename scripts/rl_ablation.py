"""Why GRPO drifts onto one option, tested as DVC experiments: the research's reward against variants
that remove the shaping terms which hand a parsed answer an advantage over an unparsed one (issue 35.6).

    python scripts/rl_ablation.py                    # print the commands (dry run)
    python scripts/rl_ablation.py --queue            # dvc exp run --queue --name rl-<variant> -S ... evaluate@rl
    dvc exp run --run-all --jobs 1                   # run the queue (each: rl, calibrate@rl, evaluate@rl)
    python scripts/rl_ablation.py --collect          # the experiments' git trees -> metrics/rl_ablation.json

The committed run uses the research's reward (+1 right, -1 wrong, -1.5 unfinished, a length penalty and
a format bonus). A parsed wrong answer then outscores a closed chain without an answer line and an
unfinished one, so under group-normalised advantages the parsed answers gain what their unparsed
siblings lose, in proportion to how often each letter is sampled: the SFT model's favourite option is
pushed whatever the question. `noformat` drops the format bonus; `binary` also drops the length penalty
and scores an unfinished chain as a wrong one, so every rollout that is not right scores the same and
only being right moves the policy. The default stays the research's reward whatever the table says.

An experiment is found by its name under any baseline commit whose params equal the committed run's
but for the variant's keys (checked: anything else is one line naming the key). Each variant is one
run, compared unpaired with the committed run; `metrics/noise/rl_seed.json` says how far one RL rerun
moves when that source has been measured.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.reporting.review.git_runs import exp_refs_by_name, first_difference, metrics_at, params_at
from decision_pipeline.reporting.report.sections_model import quarter_means

SCRIPT = "scripts/rl_ablation.py"
TARGET = "evaluate@rl"
VARIANTS: dict[str, dict[str, float]] = {
    "rl-noformat": {"rl.rewards.format": 0},
    "rl-binary": {"rl.rewards.format": 0, "rl.rewards.length": 0, "rl.reward.unfinished": -1.0},
}
RL, EVAL = "metrics/rl.json", "metrics/evaluate/rl.json"
QUARTERED = ("top_answer_share", "top_answer_gold_share", "parsed_share", "right_given_parsed")


def _get(tree: Any, key: str) -> Any:
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def _set(tree: dict, key: str, value: Any) -> dict:
    """A copy of `tree` with the dotted `key` set to `value`."""
    head, _, rest = key.partition(".")
    out = dict(tree)
    out[head] = _set(dict(out.get(head) or {}), rest, value) if rest else value
    return out


def quarters(rounds: list[dict], key: str) -> dict[str, float | None]:
    """The report's first- and last-quarter means of `key` over RL rounds, rounded for the table."""
    first, last = quarter_means(rounds, key)
    return {"first": None if first is None else round(first, 6), "last": None if last is None else round(last, 6)}


def row(name: str, overrides: dict, metrics: dict) -> dict:
    """One run's reward gain, collapse and held-out figures, or one line naming what it lacks."""
    rl, ev = metrics.get(RL) or {}, metrics.get(EVAL) or {}
    rounds = sorted(rl.get("answer_collapse") or [], key=lambda r: r["round"])
    missing = [k for k in QUARTERED if not rounds or k not in rounds[0]]
    if missing or _get(ev, "vs_sft.thinking_accuracy.diff") is None:
        what = f"{RL}:answer_collapse.*.{missing[0]}" if missing else f"{EVAL}:vs_sft"
        raise PipelineError(f"{SCRIPT}: {name} has no {what} (it did not finish {TARGET}, or predates the "
                            "collapse split); rerun it and collect again")
    ci = lambda key: {k: _get(ev, f"vs_sft.{key}.{k}") for k in ("diff", "ci_low", "ci_high")}  # noqa: E731
    return {"run": name, "overrides": overrides,
            "reward_gain": {k: _get(rl, f"reward_gain.{k}") for k in ("diff", "ci_low", "ci_high")},
            **{k: quarters(rounds, k) for k in QUARTERED},
            "vs_sft": {"thinking_accuracy": ci("thinking_accuracy"), "readout_accuracy": ci("readout_accuracy")},
            "thinking_parse_rate": _get(ev, "thinking.parse_rate"), "rl_gate_passed": _get(ev, "rl_gate.passed")}


def collect(baseline: str) -> dict:
    base_params = params_at(baseline)
    rows = [row(f"the committed run {baseline[:12]}", {}, metrics_at(baseline))]
    refs = exp_refs_by_name()
    for name, overrides in VARIANTS.items():
        if name not in refs:
            raise PipelineError(f"{SCRIPT}: {name} has no results (queued, running, failed or not queued: "
                                f"`dvc queue status`); queue it ({SCRIPT} --queue), run `dvc exp run --run-all`, "
                                "then collect again")
        expected = base_params
        for key, value in overrides.items():
            expected = _set(expected, key, value)
        other = first_difference(params_at(refs[name]), expected)
        if other:
            raise PipelineError(f"{SCRIPT}: {name} differs from the committed run {baseline[:12]} in {other}, not only "
                                f"in {', '.join(overrides)}; remove it (dvc exp remove {name}) and queue it again")
        rows.append(row(name, overrides, metrics_at(refs[name])))
    return {"source": f"the committed run {baseline[:12]} and experiments rl-<variant> (git trees)",
            "target": TARGET, "quarters": "first and last quarter of RL rounds (metrics/rl.json:answer_collapse)",
            "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queue", action="store_true", help="run the `dvc exp run --queue` commands")
    ap.add_argument("--collect", action="store_true", help="read the experiments back into --out")
    ap.add_argument("--baseline", default="HEAD", help="the committed run to compare with")
    ap.add_argument("--out", default="metrics/rl_ablation.json")
    args = ap.parse_args(argv)
    try:
        if args.collect:
            baseline = subprocess.run(["git", "rev-parse", args.baseline], capture_output=True, text=True,
                                      check=True).stdout.strip()
            table = collect(baseline)
            write_text_atomic(Path(args.out), json.dumps(table, indent=2, sort_keys=True) + "\n")
            print(f"{args.out}: {len(table['rows'])} runs")
            return 0
        for name, overrides in VARIANTS.items():
            cmd = ["dvc", "exp", "run", "--queue", "--name", name,
                   *[a for k, v in overrides.items() for a in ("-S", f"{k}={v}")], TARGET]
            print(shlex.join(cmd))
            if args.queue:
                subprocess.run(cmd, check=True)
    except (PipelineError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

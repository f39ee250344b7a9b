"""The README's `dvc exp show` commands fit a 200-column screen, with experiments in the table.

Why: plain `dvc exp show` here is every param (a few hundred), every DVCLive step log and every stage
dependency's hash, 600+ columns; `--only-changed` after an RL experiment still held 11 dependency hashes
of 21 columns (issue 54). The README documents the two commands with `--drop`/`--keep` patterns; this runs
DVC's own table code (tabulate + show_experiments, markdown: the widths without a terminal's collapsing) on
this repository's experiments data plus an RL experiment made from the committed row: rl.lr changed, and
every headline number, DVCLive value and dependency hash that an RL change can move changed with it.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
WIDTH = 200


def documented() -> dict[str, list[str]]:
    """The README's `dvc exp show` command lines (in its code blocks), as argument lists, by their options."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [ln.split("  #")[0].strip() for ln in text.splitlines() if ln.startswith("dvc exp show")]
    cmds = {("only-changed" if "--only-changed" in ln else "plain"): shlex.split(ln)[3:] for ln in lines}
    assert set(cmds) == {"plain", "only-changed"}, lines
    return cmds


def _options(args: list[str]) -> dict:
    opts: dict = {"keep": [], "drop": [], "only_changed": False}
    it = iter(args)
    for a in it:
        if a in ("--keep", "--drop"):
            opts[a[2:]].append(next(it))
        elif a == "--only-changed":
            opts["only_changed"] = True
        else:
            raise AssertionError(f"README's dvc exp show uses {a!r}; teach this test what it does")
    return opts


@pytest.fixture(scope="module")
def table():
    """DVC's table of this repository (the committed baseline) plus a synthetic RL experiment row."""
    from dvc.repo import Repo
    from dvc.repo.experiments.show import tabulate

    with Repo(str(ROOT)) as repo:
        td, headers = tabulate(repo.experiments.show(hide_workspace=True), fill_value="-")
    keys = td.keys()
    base = list(td[0])
    exp = list(base)
    metrics, deps = set(headers["metrics"]), set(headers["deps"])
    moved = [k for k in keys if k == "rl.lr"
             or k in metrics and k.startswith(("rl_", "plots/live/rl/", "train.reward"))
             or k in deps and ("rl" in k or k.startswith(("metrics/", "plots/", "data/s1mb")))]
    for k in moved:
        exp[keys.index(k)] = "changed"
    exp[keys.index("Experiment")], exp[keys.index("rev")], exp[keys.index("typ")] = "rl-lr", "1234567", "branch_base"
    td.append(exp)
    return td, headers, moved


def _render(table, opts: dict, capsys) -> list[str]:
    from dvc.commands.experiments.show import show_experiments

    td, headers, _ = table
    copy = type(td)(list(td.keys()), fill_value="-")
    copy.extend([list(r) for r in td])
    capsys.readouterr()
    show_experiments(copy, headers, keep=opts["keep"], drop=opts["drop"], pager=False, markdown=True,
                     only_changed=opts["only_changed"])
    return [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]


def test_readme_exp_show_commands_fit_200_columns_with_an_rl_experiment(table, capsys):
    td, headers, moved = table
    assert len([k for k in moved if k in headers["deps"]]) >= 11          # as many hashes as the issue saw
    for name, args in documented().items():
        lines = _render(table, _options(args), capsys)
        assert len(lines) == 4, lines                                     # header, rule, baseline, experiment
        width = max(len(ln) for ln in lines)
        assert width <= WIDTH, f"README's {name} `dvc exp show` is {width} columns: {lines[0]}"
        shown = [c.strip() for c in lines[0].strip("|").split("|")]
        assert not set(shown) & set(headers["deps"]), shown               # no dependency hash
        if name == "only-changed":
            assert {"rl.lr", "rl_readout_accuracy", "rl_reward_gain", "rl_minus_sft_thinking_accuracy"} <= set(shown)
            assert not [c for c in shown if c.startswith(("train.", "plots/"))]   # DVCLive's step logs dropped


def test_the_drop_pattern_spares_every_param_and_headline_and_drops_every_dependency(table):
    td, headers, _ = table
    pattern = re.compile("|".join(_options(documented()["only-changed"])["drop"]))
    assert all(pattern.match(d) for d in headers["deps"])
    assert not [p for p in headers["params"] if pattern.match(p)]
    headline = [m for m in headers["metrics"] if not m.startswith("plots/") and not m.startswith("train.")
                and m != "step"]
    assert len(headline) == 30 and not [m for m in headline if pattern.match(m)]

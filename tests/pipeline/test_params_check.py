"""`make check`: every params section (and -S overrides) through its typed loader, all errors at once.

Why: a typo in `rl.*` used to surface only when `rl` ran, about 20 minutes into a run; an unknown
section passed a plain `dvc repro`. The check runs first in `make run` and takes seconds.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.config import SECTIONS, collect_errors
from decision_pipeline.overrides import apply_sets, split_sets

ROOT = Path(__file__).resolve().parents[2]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def _check(tmp_path: Path, data: dict, *sets: str) -> subprocess.CompletedProcess:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    args = [a for s in sets for a in ("--set", s)]
    return subprocess.run([sys.executable, "-m", "decision_pipeline", "config", "check", "--params", str(path), *args],
                          cwd=ROOT, env=_plain_make_env(), capture_output=True, text=True)


def test_the_committed_params_pass(tmp_path):
    proc = _check(tmp_path, PARAMS)
    assert proc.returncode == 0, proc.stderr
    assert f"{len(SECTIONS)} sections OK" in proc.stdout


def test_a_typo_in_rl_fails_in_seconds_naming_the_key_and_its_twin(tmp_path):
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["rl"]["max_completion_lenght"] = data["rl"].pop("max_completion_length")
    started = time.perf_counter()
    proc = _check(tmp_path, data)
    seconds = time.perf_counter() - started
    print(f"make check with a typo in rl.*: {seconds:.2f}s")  # measured, not asserted (docs/performance.md)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, proc.stderr  # the misspelt key once, not again as "missing"
    assert "rl.max_completion_lenght: unknown key (did you mean 'max_completion_length'?)" in errors[0]


def test_every_error_is_listed_at_once(tmp_path):
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["sft"]["max_steps"] = -3
    data["sft"]["lora_rr"] = 8
    data["items"]["per_cell"] = "many"
    data["rl_typo"] = {}
    proc = _check(tmp_path, data)
    assert proc.returncode == 2
    err = proc.stderr
    for expected in ("section 'rl_typo' is unknown", "sft.max_steps: expected a value >= 1",
                     "sft.lora_rr: unknown key", "items.per_cell: expected an integer, got 'many'"):
        assert expected in err, err
    assert "4 error(s)" in err


def test_set_overrides_are_checked_like_dvc_exp_run_s(tmp_path):
    proc = _check(tmp_path, PARAMS, "rl.num_generations=zero", "curate.overfill=2.2")
    assert proc.returncode == 2 and "rl.num_generations: expected an integer, got 'zero'" in proc.stderr
    assert apply_sets(PARAMS, ["curate.overfill=2.2"], "params.yaml")["curate"]["overfill"] == 2.2
    bad = _check(tmp_path, PARAMS, "nosuch.key=1")
    assert bad.returncode == 2 and "--set nosuch.key=1: section 'nosuch' is unknown; known sections are" in bad.stderr


def test_an_unknown_key_gets_did_you_mean_never_plus_and_every_error_is_listed(tmp_path):
    """Issue 54: `make check SET="rl.lrr=1"` used to relay Hydra's "To append to your config use +rl.lrr=1" (the
    stage then refused `lrr`; "did you mean 'lr'?" came only after following that advice) and stopped there."""
    proc = _check(tmp_path, PARAMS, "rl.lrr=1", "sft.lr=-1", "rl.reward.wrongg=0", "sft.lr=[", "itmes.seed=3")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert proc.returncode == 2 and "+rl" not in proc.stderr and "append" not in proc.stderr, proc.stderr
    assert errors[0].startswith("ERROR: ") and "--set rl.lrr=1: rl.lrr: unknown key (did you mean 'lr'?)" in errors[0]
    text = "\n".join(errors)
    assert "--set rl.reward.wrongg=0: rl.reward.wrongg: unknown key (did you mean 'wrong'?)" in text, text
    assert "--set sft.lr=[:" in text                                     # Hydra's syntax refusal, reported too
    assert "--set itmes.seed=3: section 'itmes' is unknown (did you mean 'items'?)" in text
    assert "sft.lr: expected a value > 0.0, got -1.0" in text           # the good overrides still reach the loader
    assert len(errors) == 5 and "5 error(s)" in proc.stderr, proc.stderr


def test_a_known_key_params_yaml_leaves_out_gets_the_plus_advice(tmp_path):
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    field = next(k for k in ("use_vllm", "threads", "seed_offset") if k in data["rl"])
    data["rl"].pop(field)
    proc = _check(tmp_path, data, f"rl.{field}=1")
    assert proc.returncode == 2 and f"has no rl.{field}; the loader knows it, so add it with +rl.{field}=1" in proc.stderr


def test_collect_errors_puts_back_the_culprit_so_the_next_error_shows():
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["sft"]["max_steps"] = 0
    data["sft"]["warmup_steps"] = -1
    errors = collect_errors(data, "p.yaml", PARAMS)
    assert [e.split(":")[1].strip() for e in errors] == ["sft.max_steps", "sft.warmup_steps"]


@pytest.mark.parametrize("text", ["", "- a\n- b\n"], ids=["empty", "a-list"])
def test_an_empty_or_non_mapping_params_file_is_one_line(tmp_path, text):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "decision_pipeline", "config", "check", "--params", str(path)],
                          cwd=ROOT, env=_plain_make_env(), capture_output=True, text=True)
    assert proc.returncode == 2 and str(path) in proc.stderr and "mapping of sections" in proc.stderr


def test_prompt_files_are_checked_for_their_placeholders(tmp_path):
    bad = tmp_path / "reflect.md"
    bad.write_text((ROOT / "configs/prompts/small_base.md").read_text().replace("{document}", "{Document}"))
    proc = _check(tmp_path, PARAMS, f"reflect.candidates.small_base.prompt={bad}")
    assert proc.returncode == 2 and f"{bad}: placeholder {{Document}} is mis-cased" in proc.stderr


# ------------------------------------------------- never a traceback (#33.6)

@pytest.mark.parametrize("text, expected", [
    ("", []),
    ("curate.overfill=2.2", ["curate.overfill=2.2"]),
    ("items.families=[keyword, count] curate.overfill=2.2", ["items.families=[keyword, count]", "curate.overfill=2.2"]),
    ("  a.b='x y'   c.d=\"p q\" ", ["a.b='x y'", 'c.d="p q"']),
    ("a={k: [1, 2], j: 3} b=1", ["a={k: [1, 2], j: 3}", "b=1"]),
    ("a='it\\'s ] here' b=2", ["a='it\\'s ] here'", "b=2"]),
])
def test_set_is_split_at_blanks_outside_brackets_and_quotes(text, expected):
    assert split_sets(text) == expected


@pytest.mark.parametrize("text", ["a=[x, y", "a='x y", "a={k: [1, 2}"])
def test_an_unclosed_bracket_or_quote_in_set_is_one_line(text):
    with pytest.raises(PipelineError, match="no closing"):
        split_sets(text)


def test_make_check_keeps_a_list_with_a_blank_as_one_override(tmp_path):
    """The Makefile passes SET as one argument (it used to split `[keyword, count]` at the blank)."""
    stamp = tmp_path / "installed"
    stamp.touch()
    made = subprocess.run(["make", "--no-print-directory", "-n", "check", f"STAMP={stamp}", "SET=items.families=[keyword, nope] x.y='it''s'"],
                          cwd=ROOT, env=_plain_make_env(), capture_output=True, text=True)
    command = made.stdout.strip().splitlines()[-1]
    assert command.startswith(".venv/bin/python -m decision_pipeline config check --sets "), command
    import shlex
    argv = shlex.split(command)
    assert argv[-2:] == ["--sets", "items.families=[keyword, nope] x.y='it''s'"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(PARAMS, sort_keys=False))
    proc = subprocess.run([sys.executable, *argv[1:-2], "--params", str(path), "--sets", "items.families=[keyword, nope]"],
                          cwd=ROOT, env=_plain_make_env(), capture_output=True, text=True)
    assert proc.returncode == 2 and "items.families: 'nope' is not one of" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def _check_in_process(tmp_path: Path, capsys, data: dict, *args: str) -> tuple[int, list[str]]:
    from decision_pipeline.config import check_main

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    capsys.readouterr()
    code = check_main(["check", "--params", str(path), *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line for line in err.splitlines() if line.startswith("ERROR:")]


@pytest.mark.parametrize("sets", [
    "items.families=[keyword, count]", "sft.lr=[", "a", "=", "~sft.lr", "sft.lr=}", "sft=5", "base=null",
    "sft.lr=range(1,3)", "sft.lr=glob(*)", "items=[1,2]", "1=1", "a[0]=1", "sft.lr=\x00", "sft.lr=\udcff",
    "select_chains.lookup_patterns=['a{99999999999}']", "curate.filters.min_words=5", "curate.filters=null",
    "reflect.candidates.small_base.prompt=/", "reflect.charter=/dev/null", "judge.prompt='a b'",
])
def test_any_set_value_is_exit_0_or_one_line_per_error_never_a_traceback(tmp_path, capsys, sets):
    code, errors = _check_in_process(tmp_path, capsys, PARAMS, "--sets", sets)
    assert code in (0, 2) and (code == 0) == (not errors)
    assert all("\n" not in e for e in errors)


def test_every_regex_param_is_compiled_at_check_time_all_errors_at_once(tmp_path, capsys):
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["select_chains"]["lookup_patterns"] = ["fine", "(unclosed", "[z-a]"]
    data["rl"]["decisiveness_patterns"] = ["wait", "*star"]
    data["curate"]["filters"]["boilerplate"] = {"max_hits": 0, "patterns": ["ok", "(x"]}
    data["select_chains"]["quirks"] = ["", "<|x|>"]
    code, errors = _check_in_process(tmp_path, capsys, data)
    text = "\n".join(errors)
    assert code == 2
    assert "select_chains.lookup_patterns[1]: '(unclosed' is not a valid regex (missing ), unterminated" in text
    assert "select_chains.lookup_patterns[2]: '[z-a]' is not a valid regex (bad character range" in text
    assert "rl.decisiveness_patterns: '*star' is not a regex" in text  # the section's own check, said once
    assert "curate.filters.boilerplate.patterns[1]: '(x' is not a valid regex" in text
    assert "select_chains.quirks[0]: an empty string strips nothing" in text
    assert len(errors) == 5, text


def test_the_regex_param_list_is_complete():
    """Every params field documented as holding regexes is compiled by `make check` (REGEX_PARAMS)."""
    import dataclasses

    from decision_pipeline.config import REGEX_PARAMS

    def walk(cls, prefix):
        hints = __import__("typing").get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                yield from walk(hints[f.name], f"{prefix}.{f.name}")
            elif "regex" in f.metadata.get("doc", "").lower():
                yield f"{prefix}.{f.name}"
    found = {key for name, cls in SECTIONS.items() for key in walk(cls, name)}
    assert found and found <= set(REGEX_PARAMS), f"add to config.REGEX_PARAMS: {sorted(found - set(REGEX_PARAMS))}"


@pytest.mark.parametrize("data, named", [
    (lambda t: b"\xff\xfe" + t.encode("utf-16-le"), "is UTF-16 (little-endian) with a byte-order mark"),
    (lambda t: t.encode("utf-16-le"), "is UTF-16 (little-endian) text"),
    (lambda t: b"\xef\xbb\xbf" + t.encode(), "is UTF-8 with a byte-order mark (BOM)"),
    (lambda t: t.replace("{document}", "{document} caf\xe9").encode("latin-1"), "is not UTF-8"),
], ids=["utf16-bom", "utf16", "utf8-bom", "latin1"])
def test_a_prompt_file_in_any_encoding_is_one_line_naming_it(tmp_path, capsys, data, named):
    prompt = tmp_path / "reflect.md"
    prompt.write_bytes(data((ROOT / "configs/prompts/small_base.md").read_text()))
    code, errors = _check_in_process(tmp_path, capsys, PARAMS, "--set", f"reflect.candidates.small_base.prompt={prompt}")
    assert code == 2 and len(errors) == 1 and errors[0].startswith(f"ERROR: {prompt}: ") and named in errors[0]


def test_a_charter_saved_as_utf16_is_named_at_check_time(tmp_path, capsys):
    charter = tmp_path / "charter.md"
    charter.write_bytes(b"\xff\xfe" + (ROOT / "configs/charter/charter.md").read_text().encode("utf-16-le"))
    code, errors = _check_in_process(tmp_path, capsys, PARAMS, "--set", f"reflect.charter={charter}")
    assert code == 2 and errors == [f"ERROR: {charter}: is UTF-16 (little-endian) with a byte-order mark; "
                                    "save it as UTF-8 without a byte-order mark (BOM)"]


def _plain_make_env() -> dict:
    """The environment without an outer make's flags (CI runs the suite under `make test`, whose
    MAKEFLAGS would make the inner `make -n` print 'Entering directory' lines)."""
    import os
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}

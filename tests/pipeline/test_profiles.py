"""Every profile (default, micro, gpu: overlays merged over params.yaml) loads through the stages'
typed loaders and sets every key; overlays hold only differences and `apply` refuses to clobber edits."""
import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.dvcfiles import pipeline_files
from decision_pipeline.common.params import SECTION_NAMES
from decision_pipeline.common.profiles import (apply, dump, merge, merged_profile, overlay_of, profile_names, run_plan,
                                               which_profile)
from decision_pipeline.config import SECTIONS, load_all

ROOT = Path(__file__).resolve().parents[2]
PROFILES = profile_names(ROOT)


@pytest.fixture(params=PROFILES)
def merged(request, tmp_path) -> tuple[str, Path, dict]:
    """(name, a params file holding the merged profile, its data)."""
    data = merged_profile(request.param, ROOT)
    path = tmp_path / "params.yaml"
    path.write_text(dump(data))
    return request.param, path, data


def test_profile_loads_every_section(merged):
    name, path, data = merged
    assert set(data) == set(SECTIONS), f"{name}: sections differ from the stages"
    loaded = load_all(path)
    assert set(loaded) == set(SECTIONS)


def _unset_fields(cls, raw: dict, prefix: str) -> list[str]:
    """Fields of `cls` (recursing into nested config classes) that `raw` leaves to a code default."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}"
        if f.name not in raw:
            out.append(key)
        elif dataclasses.is_dataclass(hints[f.name]) and isinstance(raw[f.name], dict):
            out += _unset_fields(hints[f.name], raw[f.name], key)
    return out


def test_no_field_falls_back_to_a_code_default(merged):
    """A knob that exists in code must be written in params.yaml: a silent default hides a
    disagreement between params.yaml and the library."""
    profile, _, data = merged
    unset = [k for name, cls in SECTIONS.items() for k in _unset_fields(cls, data.get(name, {}), name)]
    assert not unset, f"{profile} leaves {unset} to code defaults; write them out"


def test_config_classes_document_every_field():
    for name, cls in SECTIONS.items():
        undocumented = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("doc")]
        assert not undocumented, f"section {name} ({cls.__name__}): fields without doc= help text: {undocumented}"


def test_section_names_every_stage_checks_match_the_config_index():
    """Stages check a file's sections against SECTION_NAMES (cheap: no config class imported)."""
    assert SECTION_NAMES == tuple(SECTIONS)


def test_unknown_section_is_one_clear_error(tmp_path):
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["sft_typo"] = {"lr": 1}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PipelineError, match="section 'sft_typo' is unknown"):
        load_all(path)


@pytest.mark.parametrize("name", PROFILES[1:])
def test_overlays_hold_only_differences(name):
    """An overlay line equal to params.yaml is a second home for that knob (it would drift)."""
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    overlay = yaml.safe_load((ROOT / "profiles" / f"{name}.yaml").read_text())
    assert overlay == overlay_of(base, merge(base, overlay)), f"profiles/{name}.yaml repeats values of params.yaml"


def test_merge_drops_null_entries_and_refuses_unknown_sections(tmp_path):
    base = {"a": {"x": 1, "y": {"k": 2}}, "b": {"c1": {"v": 1}, "c2": {"v": 2}}}
    assert merge(base, {"a": {"y": {"k": 3}}, "b": {"c2": None}}) == {"a": {"x": 1, "y": {"k": 3}}, "b": {"c1": {"v": 1}}}
    (tmp_path / "profiles").mkdir()
    (tmp_path / "params.yaml").write_text("a: {x: 1}\n")
    (tmp_path / "profiles" / "typo.yaml").write_text("aa: {x: 2}\n")
    with pytest.raises(PipelineError, match=r"typo.yaml: section 'aa' is not in params.yaml"):
        merged_profile("typo", tmp_path)


def _git_repo(tmp_path: Path) -> Path:
    import shutil
    import subprocess
    shutil.copy2(ROOT / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    shutil.copytree(ROOT / "configs", tmp_path / "configs")  # the prompt and charter files a check reads
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": __import__("os").environ["PATH"]}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, env=env)
    return tmp_path


def test_apply_switches_profiles_and_back_without_touching_other_lines(tmp_path):
    repo = _git_repo(tmp_path)
    committed = (repo / "params.yaml").read_text()
    apply("micro", repo)
    assert yaml.safe_load((repo / "params.yaml").read_text()) == merged_profile("micro", ROOT)
    apply("gpu", repo)  # from one profile to another: not an edit of yours
    assert yaml.safe_load((repo / "params.yaml").read_text())["base"]["profile"] == "gpu"
    apply("default", repo)
    assert (repo / "params.yaml").read_text() == committed


def test_apply_refuses_to_overwrite_local_edits(tmp_path):
    repo = _git_repo(tmp_path)
    edited = (repo / "params.yaml").read_text().replace("lr: 0.002", "lr: 0.0025", 1)
    assert edited != (repo / "params.yaml").read_text()
    (repo / "params.yaml").write_text(edited)
    with pytest.raises(PipelineError, match="holds edits that are not a profile"):
        apply("gpu", repo)
    assert (repo / "params.yaml").read_text() == edited  # nothing written
    apply("gpu", repo, force=True)
    assert yaml.safe_load((repo / "params.yaml").read_text())["base"]["profile"] == "gpu"


def test_dvc_stages_match_modules():
    stages = {name: stage for path in pipeline_files(ROOT)
              for name, stage in yaml.safe_load(path.read_text())["stages"].items()}
    modules = {p.stem for p in (ROOT / "stages").glob("*.py") if p.stem != "__init__"}
    assert set(stages) == modules
    for name, stage in stages.items():
        cmd = stage.get("do", stage)["cmd"]
        assert cmd.startswith(f"python -m stages.{name}"), name


# --------------------------------------------------------------- checked like params (#33.5)

@dataclasses.dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(monkeypatch, capsys):
    """`python -m decision_pipeline config ARGS --root REPO` in-process (importing torch per subprocess costs
    seconds each; one test below runs the real subprocess)."""
    from decision_pipeline.config import check_main

    def run(repo: Path, *args: str) -> Ran:
        monkeypatch.chdir(repo)
        capsys.readouterr()
        code = check_main([*args, "--root", str(repo)])
        out = capsys.readouterr()
        return Ran(code, out.out, out.err)
    return run


def test_a_misspelt_key_or_wrong_type_in_a_profile_is_refused_all_at_once_and_nothing_written(tmp_path):
    """The real command line (exit code and stderr as `make profile` shows them)."""
    import subprocess
    import sys

    repo = _git_repo(tmp_path)
    committed = (repo / "params.yaml").read_text()
    (repo / "profiles" / "micro.yaml").write_text(
        (repo / "profiles" / "micro.yaml").read_text()
        .replace("  per_cell: 8\n", "  per_cel: 8\n", 1)            # a misspelt key
        .replace("  seq_len: 64\n", "  seq_len: sixty-four\n", 1))  # a wrong type
    proc = subprocess.run([sys.executable, "-m", "decision_pipeline", "config", "profile", "micro", "--root", str(repo)],
                          cwd=repo, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    overlay = repo / "profiles" / "micro.yaml"
    assert f"ERROR: {overlay}: items.per_cel: unknown key (did you mean 'per_cell'?)" in proc.stderr
    assert f"ERROR: {overlay}: pretrain.seq_len: expected an integer, got 'sixty-four'" in proc.stderr
    assert len(errors) == 2 and len(proc.stderr.splitlines()) == 2 and "Traceback" not in proc.stderr
    assert (repo / "params.yaml").read_text() == committed  # nothing written


def test_a_profile_that_does_not_name_itself_is_refused(tmp_path, cli):
    repo = _git_repo(tmp_path)
    (repo / "profiles" / "fast.yaml").write_text("items:\n  per_cell: 9\n")  # base.profile stays 'default'
    proc = cli(repo, "profile", "fast")
    assert proc.returncode == 2 and "base.profile: is 'default'; a profile names itself" in proc.stderr


@pytest.mark.parametrize("broken", ["sft: [oops\n", "\ufeffitems:\n  per_cell: 9\n", "- a list\n",
                                    "itmes:\n  per_cell: 9\n"], ids=["bad-yaml", "bom", "a-list", "unknown-section"])
def test_a_broken_unrelated_profile_does_not_block_switching(tmp_path, broken, cli):
    repo = _git_repo(tmp_path)
    (repo / "profiles" / "zz_broken.yaml").write_text(broken, encoding="utf-8")
    apply("micro", repo)
    assert cli(repo, "profile", "gpu").returncode == 0
    assert cli(repo, "profile", "default").returncode == 0
    proc = cli(repo, "profile", "zz_broken")  # switching TO it names what is wrong, in one line
    assert proc.returncode == 2 and f"{repo / 'profiles' / 'zz_broken.yaml'}" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
    # every profile is compared with an edited params.yaml: the broken one is skipped, the edit is named
    (repo / "params.yaml").write_text((repo / "params.yaml").read_text().replace("seed: 1234", "seed: 1235", 1))
    with pytest.raises(PipelineError, match="holds edits that are not a profile"):
        apply("gpu", repo)
    assert which_profile({"base": {"profile": "zz_broken"}}, repo, yaml.safe_load(
        (ROOT / "params.yaml").read_text())) is None  # the declared profile does not read: skipped, no error


def test_the_module_cli_no_longer_applies_unchecked(tmp_path):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "decision_pipeline", "profiles", "apply", "micro"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and "make profile PROFILE=micro" in proc.stderr


def test_make_run_prints_the_profile_and_refuses_another_unless_forced(tmp_path):
    repo = _git_repo(tmp_path)
    assert run_plan("default", repo) == ("[profile] default", False)
    assert run_plan("micro", repo) == ("[profile] micro (switching params.yaml from 'default' to 'micro')", True)
    apply("micro", repo)
    with pytest.raises(PipelineError, match=r"is the 'micro' profile \(base.profile\), not PROFILE=default; "
                                            r"run it with `make run PROFILE=micro`.*FORCE_PROFILE=1"):
        run_plan("default", repo)
    line, switch = run_plan("default", repo, force=True)
    assert not switch and "micro" in line and "FORCE_PROFILE=1" in line
    assert run_plan("micro", repo) == ("[profile] micro", False)
    assert run_plan("gpu", repo)[1] is True  # from one profile to another: a switch, as `make profile` does
    edited = (repo / "params.yaml").read_text().replace("  per_cell: 8\n", "  per_cell: 9\n", 1)
    (repo / "params.yaml").write_text(edited)
    assert run_plan("micro", repo) == ("[profile] micro (with edits of yours: git diff params.yaml)", False)
    with pytest.raises(PipelineError, match="'micro' profile with edits of yours"):
        run_plan("gpu", repo)  # never overwrites edits
    with pytest.raises(PipelineError, match="PROFILE=nope: no profiles/nope.yaml"):
        run_plan("nope", repo)


def test_run_profile_cli_switches_only_after_the_check(tmp_path, cli):
    repo = _git_repo(tmp_path)
    dry = cli(repo, "run-profile", "micro", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.startswith("[profile] micro (switching")
    assert yaml.safe_load((repo / "params.yaml").read_text())["base"]["profile"] == "default"  # dry: nothing
    assert cli(repo, "run-profile", "micro").returncode == 0
    assert yaml.safe_load((repo / "params.yaml").read_text())["base"]["profile"] == "micro"
    refused = cli(repo, "run-profile", "default", "--dry-run")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "FORCE_PROFILE=1" in refused.stderr
    forced = cli(repo, "run-profile", "default", "--dry-run", "--force")
    assert forced.returncode == 0 and forced.stdout.startswith("[profile] micro: params.yaml as it is")


def test_the_makefile_prints_the_profile_first_and_passes_force_profile(tmp_path):
    import subprocess
    stamp = tmp_path / "installed"  # a fresh stamp: `make -n` prints the recipe only, installs nothing
    stamp.touch()
    out = subprocess.run(["make", "--no-print-directory", "-n", "run", f"STAMP={stamp}", "FORCE_PROFILE=1"], cwd=ROOT, env=_plain_make_env(), capture_output=True,
                         text=True).stdout.splitlines()
    assert out[0].endswith("-m decision_pipeline config run-profile 'default' --force --dry-run"), out  # quoted (#53)
    assert out.index(next(x for x in out if "config check" in x)) < out.index(next(x for x in out if "repro" in x))
    plain = subprocess.run(["make", "--no-print-directory", "-n", "run", f"STAMP={stamp}"], cwd=ROOT, env=_plain_make_env(), capture_output=True, text=True).stdout
    assert "--force" not in plain


def _plain_make_env() -> dict:
    """The environment without an outer make's flags (CI runs the suite under `make test`, whose
    MAKEFLAGS would make the inner `make -n` print 'Entering directory' lines)."""
    import os
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}

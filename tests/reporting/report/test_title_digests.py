"""The title page's digests cannot go stale: they change exactly when the report reruns.

The report is not rerun by a code or config edit that reruns an upstream stage to the same outputs
unless it depends on that code, so the run digest covers what the stages produced (params, outs) and
the report depends on every code path the code digest covers.
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from decision_pipeline.reporting.report.build import CODE_PREFIXES, code_digest, locked_stages, run_digest

ROOT = Path(__file__).resolve().parents[3]

LOCK = {"schema": "2.0", "stages": {
    "sft": {"cmd": "python -m stages.sft",
            "deps": [{"path": "stages/sft.py", "hash": "md5", "md5": "aaa", "size": 10},
                     {"path": "configs/accelerate/ddp.yaml", "hash": "md5", "md5": "ccc", "size": 5},
                     {"path": "data/kept.jsonl", "hash": "md5", "md5": "ddd", "size": 7}],
            "params": {"params.yaml": {"sft": {"lr": 0.003}}},
            "outs": [{"path": "metrics/sft.json", "hash": "md5", "md5": "mmm", "size": 3}]},
    "report": {"cmd": "python -m stages.report", "deps": [], "outs": []}}}


def _digests(tmp: Path, lock: dict) -> tuple[str, str]:
    (tmp / "dvc.yaml").write_text("stages: {}\n")   # a dvc.lock counts beside its pipeline file, as in DVC
    (tmp / "dvc.lock").write_text(yaml.safe_dump(lock))
    return run_digest(tmp), code_digest(tmp)


def test_a_code_or_config_edit_with_the_same_outputs_moves_only_the_code_digest(tmp_path):
    run0, code0 = _digests(tmp_path, LOCK)
    edited = copy.deepcopy(LOCK)
    edited["stages"]["sft"]["deps"][0]["md5"] = "bbb"      # stages/sft.py edited, same outputs
    edited["stages"]["sft"]["deps"][1]["md5"] = "eee"      # a config comment edited
    edited["stages"]["report"]["deps"] = [{"path": "x"}]   # the report's own entry never counts
    run1, code1 = _digests(tmp_path, edited)
    assert run1 == run0 and code1 != code0


def test_another_output_or_param_moves_the_run_digest(tmp_path):
    run0, _ = _digests(tmp_path, LOCK)
    for change in (("outs", 0, "md5", "nnn"), ("params", None, None, None)):
        edited = copy.deepcopy(LOCK)
        if change[0] == "outs":
            edited["stages"]["sft"]["outs"][0]["md5"] = "nnn"
        else:
            edited["stages"]["sft"]["params"]["params.yaml"]["sft"]["lr"] = 0.004
        assert _digests(tmp_path, edited)[0] != run0, change


def test_the_report_depends_on_all_the_code_its_digest_names():
    """A code-only change anywhere the code digest looks reruns the report (dvc.yaml's report deps)."""
    report = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["report"]
    deps = {d if isinstance(d, str) else next(iter(d)) for d in report["deps"]}
    lock = locked_stages(ROOT)
    named = {d["path"].split("/")[0] for name, entry in lock.items() if name != "report"
             for d in entry.get("deps", [])} & set(CODE_PREFIXES)
    assert "stages" in named and "decision_pipeline" in named, named
    missing = sorted(prefix for prefix in named if prefix not in deps)
    assert not missing, f"dvc.yaml: the report's deps lack {missing}, which its title page's code digest covers"


def test_a_part_of_the_pipeline_counts_like_the_root_file(tmp_path):
    """A stage in pipelines/<part>/dvc.lock moves both digests like one in the root dvc.lock: the title
    page names every stage upstream of the report, whichever file DVC records it in."""
    run0, code0 = _digests(tmp_path, LOCK)
    part = tmp_path / "pipelines" / "curation"
    part.mkdir(parents=True)
    (part / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"curate@curated": {
        "cmd": "python -m stages.curate curated",
        "deps": [{"path": "stages/curate.py", "hash": "md5", "md5": "fff", "size": 9}],
        "outs": [{"path": "data/curate/curated", "hash": "md5", "md5": "ggg.dir", "size": 4}]}}}))
    assert (run_digest(tmp_path), code_digest(tmp_path)) == (run0, code0)   # no dvc.yaml beside it: not DVC's
    (part / "dvc.yaml").write_text("stages: {}\n")
    run1, code1 = run_digest(tmp_path), code_digest(tmp_path)
    assert run1 != run0 and code1 != code0
    assert "pipelines/curation/dvc.yaml:curate@curated" in locked_stages(tmp_path)

"""Fuzz the readers of the newer tools' inputs (#53), as tests/pipeline/test_fuzz_inputs.py fuzzes the stages':
the noise study's plan, the noise and claims files, docs with markers and the README table, the review store
and the review app's environment. Each damaged copy ends in success or in one line naming the file (or the
variable), never a traceback, never a file changed.

Why a file of its own: the first fuzz file holds the stages' readers and is at its size limit; these readers
belong to the tools around the pipeline (reporting/review, reporting/docs, review_ui), which #53 found
ending in tracebacks. The mutants come from the same seeded helpers (fuzz_helpers.py), so a failure names a
mutant that reproduces exactly; the counts keep the file to seconds.
"""
from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest

from decision_pipeline.charter import store
from decision_pipeline.reporting.docs import numbers, readme
from decision_pipeline.reporting.report.claims import load_claims
from decision_pipeline.reporting.report.noise import NoiseBook
from decision_pipeline.reporting.report.sources import Store
from decision_pipeline.reporting.review import diff
from decision_pipeline.reporting.review import noise_study as ns
from decision_pipeline.reporting.review.noise_manifest import read_manifest
from decision_pipeline.review_ui import network
from tests.pipeline.fuzz_helpers import (Mutant, WRONG_VALUES, attempt, byte_mutants, json_bytes, json_mutants,
                                         listing, message_problem, outcome, report, rng_for)

ROOT = Path(__file__).resolve().parents[2]
# more draws than the stages' fuzz: these readers are cheap (the whole file runs in seconds at these counts)
N = (int(os.environ.get("FUZZ_N_BYTES", 40)), int(os.environ.get("FUZZ_N_TYPES", 30)))
SHA = "0123456789abcdef0123456789abcdef01234567"


def _note(findings: list[str], case: str, problem: str | None, root: Path, before: dict[str, bytes]) -> None:
    """Record what went wrong with one mutant: how its reader ended, or a file it changed."""
    if problem:
        findings.append(f"{case}: {problem}")
    if listing(root) != before:
        findings.append(f"{case}: files changed")


# ------------------------------------------------------------------ the noise study's plan

PLAN = {"baseline": SHA, "runs": {"noise-reseed-1": {"source": "reseed", "overrides": {"base.seed": 11}},
                                  "noise-sft_seed-1": {"source": "sft_seed", "overrides": {"sft.seed_offset": 1},
                                                       "baseline": SHA}}}


def test_noise_plan_fuzz(tmp_path: Path) -> None:
    """`.dvc/tmp/noise_study.json` through the one reader --run, --collect and --extend share."""
    findings = []
    for i, m in enumerate([Mutant("baseline", json_bytes(PLAN))] + json_mutants(PLAN, "noise-plan", *N)):
        path = tmp_path / f"plan-{i}.json"
        path.write_bytes(m.data)
        status, problem = attempt(lambda: read_manifest(path, ns.SOURCES, "no plan"), [path.name])
        if m.name == "baseline":
            assert status == "ok"
        if problem:
            findings.append(f"{m.name}: {problem}")
    assert not findings, report(findings)


# ------------------------------------------------------------------ noise and claims files

def _small(doc: dict, files: int = 2, keys: int = 3) -> dict:
    """A real noise file cut to a few metrics (the whole one is 300 KB: each mutant re-dumps it)."""
    spread = {f: dict(list(v.items())[:keys]) for f, v in list(doc["spread"].items())[:files]}
    return {**doc, "spread": spread}


def test_noise_file_fuzz(tmp_path: Path) -> None:
    """metrics/noise/reseed.json as the review reads it (noise_files, bands, coverage) and as the report reads
    it (NoiseBook): one line naming the file, or a reading that goes through."""
    base = _small(json.loads((ROOT / "metrics/noise/reseed.json").read_text()))
    findings = []
    for i, m in enumerate([Mutant("baseline", json_bytes(base))] + json_mutants(base, "noise-file", *N)):
        root = tmp_path / str(i)
        (root / "metrics/noise").mkdir(parents=True)
        (root / "metrics/noise/reseed.json").write_bytes(m.data)
        before = listing(root)

        def review() -> None:
            files = diff.noise_files(root)
            diff.coverage({}, diff.bands(files, "reseed"))

        for what, call in (("review", review), ("report", lambda: NoiseBook(Store(root)))):
            status, problem = attempt(call, ["reseed.json"])
            if m.name == "baseline":
                assert status == "ok", (what, problem)
            _note(findings, f"{what} {m.name}", problem, root, before)
    assert not findings, report(findings)


def test_claims_file_fuzz(tmp_path: Path) -> None:
    """metrics/claims.json through the report's reader (the Claims table and the prose it guards)."""
    data = json.loads((ROOT / "metrics/claims.json").read_text())
    base = {**data, "comparisons": dict(list(data["comparisons"].items())[:3])}
    findings = []
    for i, m in enumerate([Mutant("baseline", json_bytes(base))] + json_mutants(base, "claims", *N)):
        root = tmp_path / str(i)
        (root / "metrics").mkdir(parents=True)
        (root / "metrics/claims.json").write_bytes(m.data)
        status, problem = attempt(lambda: load_claims(Store(root)), ["claims.json"])
        if m.name == "baseline":
            assert status == "ok", problem
        if problem:
            findings.append(f"{m.name}: {problem}")
    assert not findings, report(findings)


# ------------------------------------------------------------------ docs with markers, the README table

DOC = ("# Results\n\nThe gain is <!--m x:gain %+.3f-->+0.209<!--/m--> and the verdict <!--m \"passes\" if "
       "x:ok else \"fails\"-->passes<!--/m-->; <!--m words(x:list.*)-->1, 2 and 3<!--/m--> items.\n\n"
       "```\n<!--m not:a marker-->\n```\n<!--measured manual 2026-12-01-->1.5 s<!--/measured-->\n")
METRICS = {"gain": 0.2093, "ok": True, "list": [1, 2, 3]}


def _nested(rng: random.Random) -> str:
    """A marker expression nested at a random depth from a random mix of operators (what the evaluator recurses)."""
    expr = "x:gain"
    for _ in range(rng.choice([5, 99, 101, 300, 800, 3000])):
        expr = rng.choice(["not {}", "-{}", "({})", "abs({})", "{} + 1", "1 if {} else 0", "max({}, 1)"]).format(expr)
    return expr


def _docs_check(root: Path) -> str | None:
    """docs-numbers over docs/d.md: errors are lines naming the doc (or the cited file); no exception."""
    try:
        found = numbers.scan(["docs/d.md"], root)
    except Exception as exc:  # noqa: BLE001
        from decision_pipeline.common.errors import PipelineError
        return message_problem(str(exc), ["d.md"]) if isinstance(exc, PipelineError) else \
            f"traceback: {type(exc).__name__}: {str(exc)[:120]}"
    bad = [e for e in found.errors if message_problem(e, ["docs/d.md", "x.json"])]
    return f"error lines not naming the doc: {bad[:2]}" if bad else None


def test_docs_fuzz(tmp_path: Path) -> None:
    """A doc with markers, its metrics file and marker expressions, damaged: `make docs` (docs-numbers) lists
    error lines naming the doc, or regenerates; and the README's results table (readme.update) likewise."""
    rng = rng_for("docs")
    cases = [("doc", m) for m in byte_mutants(DOC.encode(), rng, N[0])]
    cases += [("metrics", m) for m in json_mutants(METRICS, "docs-metrics", *N)]
    cases += [("doc", Mutant(f"nested:{i}", f"v <!--m {_nested(rng)} %.1f-->1<!--/m-->\n".encode()))
              for i in range(8)]
    findings = []
    for i, (which, m) in enumerate(cases):
        root = tmp_path / str(i)
        (root / "docs").mkdir(parents=True)
        (root / "metrics").mkdir()
        (root / "docs/d.md").write_bytes(m.data if which == "doc" else DOC.encode())
        (root / "metrics/x.json").write_bytes(m.data if which == "metrics" else json_bytes(METRICS))
        before = listing(root)
        _note(findings, f"{which} {m.name}", _docs_check(root), root, before)
    assert not findings, report(findings)


def test_readme_table_fuzz(tmp_path: Path) -> None:
    """README.md around its results-table markers, and metrics/summary.json, damaged: `make docs`'s first step
    rewrites the table or refuses in one line naming the file, README.md untouched."""
    text = (ROOT / "README.md").read_text()
    summary = {k: v for k, v in json.loads((ROOT / "metrics/summary.json").read_text()).items()}
    rng = rng_for("readme")
    end = "<!-- results-table:end -->"
    cases = [("readme", m) for m in byte_mutants(text.encode(), rng, N[0] // 2)]
    cases += [("readme", Mutant(name, variant.encode())) for name, variant in (
        ("end-cut", text.replace(end, "")), ("begin-cut", text.replace(readme.BEGIN, "")),
        ("end-first", text.replace(end, "").replace(readme.BEGIN, end + "\n" + readme.BEGIN)),
        ("twice", text + "\n" + readme.BEGIN + "\n" + end + "\n"))]
    cases += [("summary", m) for m in json_mutants(summary, "readme-summary", N[0] // 2, N[1])]
    findings = []
    for i, (which, m) in enumerate(cases):
        root = tmp_path / str(i)
        (root / "metrics").mkdir(parents=True)
        (root / "README.md").write_bytes(m.data if which == "readme" else text.encode())
        (root / "metrics/summary.json").write_bytes(m.data if which == "summary" else json_bytes(summary))
        before = (root / "README.md").read_bytes()
        status, problem = attempt(lambda: readme.update(root / "README.md", root / "metrics/summary.json"),
                                  ["README.md", "summary.json"])
        if problem:
            findings.append(f"{which} {m.name}: {problem}")
        elif status == "refused" and (root / "README.md").read_bytes() != before:
            findings.append(f"{which} {m.name}: refused, yet README.md changed")
    assert not findings, report(findings)


# ------------------------------------------------------------------ the review store

def _store_mutants(data: bytes, rng: random.Random) -> list[Mutant]:
    """A half-copied store, flipped pages and header bytes, a file that is no database."""
    out = [Mutant("empty", b""), Mutant("text", b"reviews, not a database\n"), Mutant("header-only", data[:100])]
    out += [Mutant(f"truncate@{at}", data[:at]) for at in sorted(rng.sample(range(100, len(data)), 4))]
    for _ in range(N[0]):
        at = rng.randrange(0, len(data))
        out.append(Mutant(f"flip@{at}", data[:at] + bytes([data[at] ^ rng.randrange(1, 256)]) + data[at + 1:]))
    return out


def test_review_store_fuzz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The live review store damaged: `make review-export` (the review-ui CLI, in this process) exits 0 or exits
    2 with one line naming the store; opening it for the app refuses in one line."""
    from decision_pipeline.review_ui import cli

    good = tmp_path / "good.sqlite"
    conn = store.open_store(good)
    store.add_annotations(conn, [{"id": "a1", "doc_id": "d1", "candidate": "c", "prompt_version": 1,
                                  "split": "validation", "safety_score": 0, "document": "doc",
                                  "reflection": "First person: I\nObserver: they"}])
    conn.close()
    findings = []
    for i, m in enumerate(_store_mutants(good.read_bytes(), rng_for("review-store"))):
        root = tmp_path / str(i)
        root.mkdir()
        (root / "live.sqlite").write_bytes(m.data)
        monkeypatch.setenv("REVIEW_STORE", str(root / "live.sqlite"))
        capsys.readouterr()
        try:
            rc = cli.main(["export", "--out", str(root / "export.jsonl")])
        except Exception as exc:  # noqa: BLE001
            findings.append(f"export {m.name}: traceback {type(exc).__name__}: {str(exc)[:100]}")
            continue
        err = capsys.readouterr().err.strip()
        if rc == 2 and (problem := message_problem(err, ["live.sqlite"])):
            findings.append(f"export {m.name}: {problem}")
        elif rc not in (0, 2):
            findings.append(f"export {m.name}: exit {rc}")
        problem = outcome(lambda: store.open_store(root / "live.sqlite").close(), ["live.sqlite"])
        if problem:
            findings.append(f"open {m.name}: {problem}")
    assert not findings, report(findings)


# ------------------------------------------------------------------ the review app's environment

def test_review_app_environment_fuzz() -> None:
    """REVIEW_UI_PORT, REVIEW_UI_HOST and REVIEW_UI_ALLOWED_HOSTS set to what a person or a script might put
    there: each is read, or refused in one line naming the variable."""
    rng = rng_for("review-env")
    values = [str(v) for v in WRONG_VALUES] + ["8765", " 8765 ", "0x20", "8765.0", "1e3", "65536", "-1", "abc",
                                               "0.0.0.0", "::", "[::1]", "localhost", "10.0.0.5", "a b", "a,b",
                                               "*", ".example", "host:port", "[::1]:x", "http://x", "\x00", "ä.example"]
    values += ["".join(rng.choice(",.:[]* -_aZ09/\\\u200b%") for _ in range(rng.randrange(1, 12))) for _ in range(30)]
    findings = []
    for name, read in (("REVIEW_UI_PORT", lambda env: network.port_from_env(env)),
                       ("REVIEW_UI_HOST", lambda env: network.host_from_env(env)),
                       ("REVIEW_UI_ALLOWED_HOSTS", lambda env: network.allowed_hosts("0.0.0.0", env))):
        for value in values:
            problem = outcome(lambda: read({name: value}), [name])
            if problem:
                findings.append(f"{name}={value!r}: {problem}")
    for header in values:  # a Host header is the network's input: answered or refused, never an exception
        problem = outcome(lambda: network.host_allowed(header, ("127.0.0.1", ".example")), ["Host"])
        if problem:
            findings.append(f"Host {header!r}: {problem}")
    assert not findings, report(findings)
    assert shutil.which("git")  # the fixtures above ran without touching the repository

"""Fuzz every reader of a file a person or another program writes (#33.9): each damaged copy ends in
success or in one line naming the file, never a traceback, never a partial output.

Why: tests/pipeline/test_bad_inputs.py has the hand-written cases a person thought of; this draws,
from one seeded generator (tests/pipeline/fuzz_helpers.py), the damage nobody thinks of — a
truncation mid-token, a flipped byte in a safetensors header, `level: .nan`, a list where a mapping
goes — over params, profiles, prompts, the JSONL imports (reviews export, external questions,
external pool/dev), S1MB files and model directories. Each reader is reached the cheapest honest
way: in-process through the one validated reader the stage or CLI calls, plus a few real subprocess
runs of the CLIs (exit 2, one stderr line, no traceback, no output). Bounded counts keep the whole
file to seconds on the shared 2-core CI machine; the same seed draws the same mutants every run.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from decision_pipeline.bench.s1mb import case_from_row, read_rows
from decision_pipeline.bench.s1mb import cli as s1mb_cli
from decision_pipeline.charter import store
from decision_pipeline.charter.charter import load_charter
from decision_pipeline.charter.prompts import load_prompt
from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.common.params import load_section, read_params_file
from decision_pipeline.curation.documents import load_external_pool
from decision_pipeline.questions.splits import ItemsParams
from decision_pipeline.questions.schema import load_external_questions
from tests.bench.s1mb_helpers import mixed_row
from tests.pipeline.fuzz_helpers import (Mutant, attempt, byte_mutants, duplicate_json_key, json_bytes, json_mutants,
                                         jsonl_bytes, listing, message_problem, outcome, report, rng_for, typed_mutants,
                                         yaml_mutants)
from tests.pipeline.test_bad_inputs import QUESTION

ROOT = Path(__file__).resolve().parents[2]
# random byte and type draws per entry point, on top of the fixed encodings (fuzz_helpers); more by hand
N_BYTES, N_TYPES = int(os.environ.get("FUZZ_N_BYTES", 10)), int(os.environ.get("FUZZ_N_TYPES", 12))
N = (N_BYTES, N_TYPES)
ENV = {**os.environ, "PIPELINE_QUIET": "1", "HF_HUB_OFFLINE": "1"}
PARAMS_TEXT = (ROOT / "params.yaml").read_text()  # the baseline every params/profile mutant starts from


# ------------------------------------------------------------------ params: make check and a stage's loader

def test_params_fuzz_check_and_stage_loader(tmp_path: Path, capsys: pytest.CaptureFixture,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`make check` (in-process check_main) lists errors as `ERROR:` lines naming the file and exits 2, or
    passes; a stage's loader (load_section) raises one line or loads. Neither writes anything."""
    from decision_pipeline.config import check_main

    monkeypatch.chdir(ROOT)  # prompt and charter paths in params are relative to the repository
    findings, codes = [], []
    for i, m in enumerate([Mutant("baseline", PARAMS_TEXT.encode())] + yaml_mutants(PARAMS_TEXT, "params", *N)):
        path = tmp_path / f"params-{i}.yaml"
        path.write_bytes(m.data)
        before = listing(tmp_path)
        capsys.readouterr()
        try:
            rc = check_main(["check", "--params", str(path)])
        except Exception as exc:  # noqa: BLE001
            findings.append(f"check {m.name}: traceback {type(exc).__name__}: {exc}")
            continue
        codes.append(rc)
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        if rc not in (0, 2) or (rc == 2) != bool(lines):
            findings.append(f"check {m.name}: exit {rc}, stderr {err[-300:]!r}")
        elif rc == 2 and not all(line.startswith("[check] ") or line.startswith("ERROR: ")
                                 and (path.name in line or "configs/" in line) for line in lines):
            findings.append(f"check {m.name}: a line is not an error naming the file: {err[-400:]!r}")
        problem = outcome(lambda: load_section(ItemsParams, "items", path), [path.name])
        if problem:
            findings.append(f"load_section {m.name}: {problem}")
        if listing(tmp_path) != before:
            findings.append(f"{m.name}: files changed under {tmp_path}")
    assert codes[0] == 0 and codes.count(2) > len(codes) // 2, f"baseline exit {codes[0]}; exits {codes}"
    assert not findings, report(findings)


# ------------------------------------------------------------------ profiles: make profile

def _profile_root(tmp: Path, overlay: bytes) -> Path:
    root = tmp / "root"
    (root / "profiles").mkdir(parents=True)
    (root / "params.yaml").write_text(PARAMS_TEXT)
    (root / "profiles" / "micro.yaml").write_bytes(overlay)
    return root


def test_profile_fuzz_merge_writes_valid_params_or_nothing(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`make profile PROFILE=micro` over a damaged profiles/micro.yaml: exit 0 with a params.yaml that loads,
    or exit 2 with `ERROR:` lines naming a file, params.yaml byte for byte as it was and no stray file."""
    from decision_pipeline.config import collect_errors, profile_main

    monkeypatch.chdir(ROOT)
    findings, codes = [], []
    text = (ROOT / "profiles" / "micro.yaml").read_text()
    for i, m in enumerate([Mutant("baseline", text.encode())] + yaml_mutants(text, "profile", *N)):
        root = _profile_root(tmp_path / str(i), m.data)
        before = listing(root)
        capsys.readouterr()
        try:
            rc = profile_main("profile", "micro", str(root), False, False)
        except Exception as exc:  # noqa: BLE001
            findings.append(f"profile {m.name}: traceback {type(exc).__name__}: {exc}")
            continue
        codes.append(rc)
        err = capsys.readouterr().err.strip().splitlines()
        if rc == 0:
            params = read_params_file(root / "params.yaml")
            if collect_errors(params, "params.yaml") or set(listing(root)) != set(before):
                findings.append(f"profile {m.name}: exit 0 but the merged params.yaml does not load")
        elif rc != 2 or not err or not all(line.startswith("ERROR: ") and (".yaml" in line or ".md" in line)
                                           for line in err):
            findings.append(f"profile {m.name}: exit {rc}, stderr {err[-3:]!r}")
        elif listing(root) != before:
            findings.append(f"profile {m.name}: refused, yet files changed under its root")
    assert codes[0] == 0 and codes.count(2) > len(codes) // 2, f"baseline exit {codes[0]}; exits {codes}"
    assert not findings, report(findings)


# ------------------------------------------------------------------ prompt files

@pytest.mark.parametrize("name, kind", [("small_base.md", "reflection"), ("judge.md", "judge")])
def test_prompt_fuzz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, kind: str) -> None:
    """A damaged prompt file loads or is one line naming it (front matter, encoding, placeholders)."""
    monkeypatch.chdir(ROOT)
    charter = load_charter("configs/charter/charter.md")
    text = (ROOT / "configs" / "prompts" / name).read_text()
    rng = rng_for(f"prompt:{name}")
    mutants = byte_mutants(text.encode(), rng, N_BYTES) + [
        Mutant(f"version:{v}", text.replace("version: 1", f"version: {v}", 1).encode())
        for v in ("[1]", "{a: 1}", ".nan", ".inf", "1e400", "'1'", "null", "1\nversion: 2", "-1", "99999999999999999999")]
    mutants += [Mutant("no-closing-front-matter", text.replace("---\n", "", 2).encode()),
                Mutant("front-matter-not-a-mapping", text.replace("version: 1", "- 1", 1).encode())]
    load_prompt(ROOT / "configs" / "prompts" / name, charter, kind)  # the baseline loads
    findings = []
    for i, m in enumerate(mutants):
        path = tmp_path / f"{i}-{name}"
        path.write_bytes(m.data)
        problem = outcome(lambda: load_prompt(path, charter, kind), [path.name])
        if problem:
            findings.append(f"{m.name}: {problem}")
    assert not findings, report(findings)


# ------------------------------------------------------------------ JSONL imports

SCORES = {v: {d: 4 for d in DIMENSIONS} for v in VOICES}
REVIEWS = [{"kind": "review", "id": f"r{i}", "annotation_id": f"a{i % 2}", "reviewer": who, "scores": SCORES,
            "verdict": verdict, "notes": "", "created_at": f"2026-01-0{i + 1}T10:00:00"}
           for i, (who, verdict) in enumerate([("ada", "accept"), ("ben", "reject"), ("cy", "accept")])]
REVIEWS.append({"kind": "comment", "id": "c1", "review_id": "r1", "reviewer": "ada", "verdict": None,
                "body": "agree", "created_at": "2026-01-05T10:00:00"})


def _annotated_store(path: Path) -> sqlite3.Connection:
    conn = store.open_store(path)
    store.add_annotations(conn, [{"id": f"a{i}", "doc_id": f"d{i}", "candidate": "c", "prompt_version": 1,
                                  "split": "validation", "safety_score": 0, "document": "doc",
                                  "reflection": "First person: I\nObserver: they"} for i in range(2)])
    return conn


def test_reviews_import_fuzz(tmp_path: Path) -> None:
    """The reviews export (`reviews.source: import`): the store's import and the preflight's check of the
    same file. A refused import leaves the store as it was; the preflight returns lines, never raises."""
    from decision_pipeline.preflight.checks import check_reviews

    findings = []
    for i, m in enumerate([Mutant("baseline", jsonl_bytes(REVIEWS))] + json_mutants(REVIEWS, "reviews", *N, jsonl=True)):
        path = tmp_path / f"export-{i}.jsonl"
        path.write_bytes(m.data)
        conn = _annotated_store(tmp_path / f"store-{i}.sqlite")
        try:
            status, problem = attempt(lambda: store.import_jsonl(conn, path), [path.name])
            stored = len(store.reviews(conn)) + len(store.comments(conn))
        finally:
            conn.close()
        if m.name == "baseline":
            assert status == "ok" and stored == len(REVIEWS)
        if problem:
            findings.append(f"import {m.name}: {problem}")
        elif status == "refused" and stored:
            findings.append(f"import {m.name}: refused, yet {stored} records were stored")
        params = {"reviews": {"source": "import", "import_path": str(path)}}
        problem = outcome(lambda: check_reviews(params, tmp_path), [path.name])
        if problem:
            findings.append(f"preflight {m.name}: {problem}")
    assert not findings, report(findings)


QUESTIONS = [QUESTION, {**QUESTION, "id": "ext-2", "level": 2, "target": {"a": 0.25, "b": 0.75}},
             {**QUESTION, "id": "ext-3", "task": "score", "gold": "b",
              "options": [{"id": "a", "text": "low", "value": 1}, {"id": "b", "text": "high", "value": 5}]}]


def _parquet_bytes(tmp: Path, rows: list[dict]) -> bytes:
    pq.write_table(pa.Table.from_pylist(rows), tmp / "base.parquet")
    return (tmp / "base.parquet").read_bytes()


def _parquet_mutants(data: bytes, salt: str) -> list[Mutant]:
    """Truncations and flips of a Parquet file (a killed copy, a bad disk): encodings mean nothing there."""
    rng = rng_for(salt)
    return [Mutant("empty", b"")] + [
        Mutant(f"truncate@{at}", data[:at]) for at in sorted(rng.sample(range(1, len(data)), 4))] + [
        Mutant(f"flip@{at}", data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1:])
        for at in sorted(rng.sample(range(len(data)), 4))]


def test_external_questions_fuzz(tmp_path: Path) -> None:
    """`items.external` (JSONL and Parquet) through the one reader the items stage calls."""
    base = jsonl_bytes(QUESTIONS)
    (tmp_path / "ok.jsonl").write_bytes(base)
    assert len(load_external_questions(tmp_path / "ok.jsonl")) == len(QUESTIONS)
    rows = [{**{k: v for k, v in q.items() if k not in ("options", "target")}, "options_json": json.dumps(q["options"]),
             **({"target_json": json.dumps(q["target"])} if "target" in q else {})} for q in QUESTIONS]
    rows = [{**r, "level": r.get("level", 0), "target_json": r.get("target_json")} for r in rows]
    cases = [(f"jsonl {m.name}", "jsonl", m) for m in json_mutants(QUESTIONS, "questions", *N, jsonl=True)]
    cases += [(f"parquet {m.name}", "parquet", m) for m in _parquet_mutants(_parquet_bytes(tmp_path, rows), "qparquet")]
    findings = []
    for i, (name, suffix, m) in enumerate(cases):
        path = tmp_path / f"questions-{i}.{suffix}"
        path.write_bytes(m.data)
        problem = outcome(lambda: load_external_questions(path), [path.name])
        if problem:
            findings.append(f"{name}: {problem}")
    assert not findings, report(findings)


POOL = [{"id": "p1", "text": "markets rose today", "register": "news"},
        {"id": "p2", "text": "how do I fix a bike chain", "register": "qa"},
        {"id": 3, "text": "the river is long", "register": "encyclopedic"}]


def test_external_pool_and_dev_fuzz(tmp_path: Path) -> None:
    """`ingest.external_pool` / `ingest.external_dev` (JSONL and Parquet) through `load_external_pool`."""
    cases = [(f"jsonl {m.name}", "jsonl", m) for m in json_mutants(POOL, "pool", *N, jsonl=True)]
    cases += [(f"parquet {m.name}", "parquet", m)
              for m in _parquet_mutants(_parquet_bytes(tmp_path, [{**d, "id": str(d["id"])} for d in POOL]), "ppool")]
    findings = []
    for i, (name, suffix, m) in enumerate(cases):
        path = tmp_path / f"pool-{i}.{suffix}"
        path.write_bytes(m.data)
        problem = outcome(lambda: load_external_pool(path), [path.name])
        if problem:
            findings.append(f"{name}: {problem}")
    assert not findings, report(findings)


# ------------------------------------------------------------------ S1MB files

JUDGMENTS = [
    {"benchmark": "demo-noul-test-v1", "task": "noul", "case_id": f"c{i}", "question_id": "q",
     "options": [{"id": "false"}, {"id": "true"}], "target": {"false": 1 - t, "true": t},
     "prediction": {"false": 0.5, "true": 0.5} if i else None} for i, t in enumerate([1, 0, 1, 0])] + [
    {"benchmark": "demo-choice-test-v1", "task": "choice", "case_id": "k1", "question_id": "q",
     "options": [{"id": "a"}, {"id": "b"}], "target": {"a": 0, "b": 1}, "prediction": {"a": 0.25, "b": 0.75}},
    {"benchmark": "demo-score-test-v1", "task": "score", "case_id": "s1", "question_id": "q",
     "options": [{"id": "lo", "value": 1}, {"id": "hi", "value": 5}], "target": {"lo": 1, "hi": 0},
     "prediction": {"lo": 0.5, "hi": 0.5}}]
TABLE = {"org__a": {"demo-noul-test-v1": {"task": "noul", "adjusted": 0.5},
                    "demo-choice-test-v1": {"task": "choice", "adjusted": 0.25, "eligible": True}},
         "org__b": {"demo-noul-test-v1": {"task": "noul", "adjusted": 0.75, "complete": True},
                    "demo-choice-test-v1": {"task": "choice", "adjusted": None}}}


def _s1mb(command: str, path: Path, capsys: pytest.CaptureFixture) -> str | None:
    """The S1MB CLI in-process: exit 0 with JSON on stdout, or exit 2 with one stderr line naming the file
    and nothing on stdout."""
    capsys.readouterr()
    try:
        rc = s1mb_cli.main([command, str(path)])
    except Exception as exc:  # noqa: BLE001
        return f"traceback: {type(exc).__name__}: {str(exc)[:120]}"
    out, err = capsys.readouterr()
    if rc == 0:
        return None if json.loads(out) is not None and not err else f"exit 0 with stderr {err[:200]!r}"
    if rc != 2 or out:
        return f"exit {rc}, stdout {out[:100]!r}"
    return message_problem(err.strip(), [path.name])


@pytest.mark.parametrize("command, base", [("metrics", "judgments"), ("aggregate", "table")])
def test_s1mb_cli_fuzz(tmp_path: Path, capsys: pytest.CaptureFixture, command: str, base: str) -> None:
    """`python -m decision_pipeline s1mb metrics|aggregate FILE` on damaged judgments / score tables."""
    obj, jsonl = (JUDGMENTS, True) if base == "judgments" else (TABLE, False)
    findings = []
    for i, m in enumerate([Mutant("baseline", (jsonl_bytes if jsonl else json_bytes)(obj))]
                          + json_mutants(obj, f"s1mb:{command}", *N, jsonl=jsonl)):
        path = tmp_path / f"{base}-{i}.json{'l' if jsonl else ''}"
        path.write_bytes(m.data)
        problem = _s1mb(command, path, capsys)
        if m.name == "baseline":
            assert problem is None
        if problem:
            findings.append(f"{command} {m.name}: {problem}")
    assert not findings, report(findings)


def test_s1mb_dataset_export_fuzz(tmp_path: Path) -> None:
    """Rows of a local S1MB export (`s1mb_data.source: local`): read_rows + case_from_row, as load_cases does."""
    rows = [mixed_row("case-1"), mixed_row("case-2", t_true=0.0, label="b")]

    def load(folder: Path) -> None:
        for row in read_rows(folder):
            case_from_row(row)

    findings = []
    for i, m in enumerate([Mutant("baseline", jsonl_bytes(rows))] + json_mutants(rows, "s1mb:dataset", *N, jsonl=True)):
        folder = tmp_path / str(i) / "test"
        folder.mkdir(parents=True)
        (folder / "rows.jsonl").write_bytes(m.data)
        problem = outcome(lambda: load(folder.parent), ["rows.jsonl", "case-1", "case-2", "case"])
        if m.name == "baseline":
            assert problem is None
        if problem:
            findings.append(f"{m.name}: {problem}")
    assert not findings, report(findings)


# ------------------------------------------------------------------ model directories

def _safetensors_mutants(data: bytes, rng: random.Random) -> list[Mutant]:
    """A half-copied file, a damaged header (its length, its JSON), trailing bytes: the header is what is read."""
    n = int.from_bytes(data[:8], "little")
    cuts = [4, 8 + n // 2, 8 + n, len(data) - 1, rng.randrange(8 + n, len(data))]
    out = [Mutant(f"truncate@{at}", data[:at]) for at in cuts]
    for _ in range(N_BYTES - 2):
        at = rng.randrange(0, 8 + n)
        out.append(Mutant(f"flip@{at}", data[:at] + bytes([data[at] ^ rng.randrange(1, 256)]) + data[at + 1:]))
    return out + [Mutant("trailing", data + b"\0" * 16), Mutant("empty", b"")]


def _model_mutants(base: Path) -> list[tuple[str, Mutant]]:
    """(file, mutant) over config.json, the tokenizer files and model.safetensors."""
    rng = rng_for("model")
    out: list[tuple[str, Mutant]] = []
    for name, n_bytes, n_types in (("config.json", N_BYTES // 2, N_TYPES), ("tokenizer_config.json", N_BYTES // 5,
                                    N_TYPES // 3), ("tokenizer.json", N_BYTES // 3, 0)):
        text = (base / name).read_text()
        obj = json.loads(text)
        top = [(k,) for k in obj]  # top-level keys: a nested tokenizer.json path is mostly vocabulary
        muts = byte_mutants(text.encode(), rng, n_bytes) + typed_mutants(obj, rng, n_types, json_bytes, top)
        out += [(name, m) for m in muts + ([duplicate_json_key(text, rng)] if n_types else [])]
    out += [("model.safetensors", m) for m in _safetensors_mutants((base / "model.safetensors").read_bytes(), rng)]
    return out


def test_model_directory_fuzz(tmp_path: Path, tiny_dir: str) -> None:
    """A damaged model directory: the preflight's checks (tokenizer, weights, memory-plan config) return
    lines and never raise, and the stages' loaders (load_tokenizer, load_model) either load it or refuse
    in one line — so a directory the preflight passes is one the first model load can read."""
    from decision_pipeline.lm.bpe import load_tokenizer as stage_tokenizer
    from decision_pipeline.lm.model import load_model
    from decision_pipeline.lm.weights import weight_problems
    from decision_pipeline.preflight.checks import load_tokenizer as preflight_tokenizer
    from decision_pipeline.preflight.plan import read_shape

    base = Path(tiny_dir)
    findings = []
    for i, (name, m) in enumerate(_model_mutants(base)):
        model = tmp_path / f"model-{i}"
        shutil.copytree(base, model)
        (model / name).write_bytes(m.data)
        before = listing(model)
        case, names = f"{name} {m.name}", [model.name]
        lines: list[str] = []
        for what, call in (("preflight tokenizer", lambda: lines.extend(preflight_tokenizer(str(model), "key")[1])),
                           ("preflight weights", lambda: lines.extend(weight_problems(model, "key")))):
            status, problem = attempt(call, names)
            if status != "ok":
                findings.append(f"{case}: {what} raised instead of returning lines: {problem or 'PipelineError'}")
        findings += [f"{case}: preflight line {problem}" for problem in
                     (message_problem(line, names) for line in lines) if problem]
        loads = [(what, *attempt(call, names)) for what, call in (
            ("plan config", lambda: read_shape(model)), ("stage tokenizer", lambda: stage_tokenizer(model)),
            ("stage model", lambda: load_model(model, device="cpu")))]
        findings += [f"{case}: {what}: {problem}" for what, _, problem in loads if problem]
        if not lines and any(status != "ok" for what, status, _ in loads if what != "plan config"):
            findings.append(f"{case}: the preflight passed it, the stage refused it: {loads}")
        if listing(model) != before:
            findings.append(f"{case}: the checks wrote into the model directory")
    assert not findings, report(findings)


# ------------------------------------------------------------------ the real CLIs, a few cases

def test_clis_as_subprocesses_exit_2_with_error_lines_only(tmp_path: Path) -> None:
    """The CLIs as people run them (`make check`, the S1MB CLI), on seeded mutants: exit 2, error lines only
    (`make check` lists every error, then a summary), no traceback, nothing on stdout from the S1MB CLI,
    the directory untouched. One `make check` only: importing the config module costs ~7 s on the shared
    2-core machine, and `make profile` prints through the same code (its in-process test is above)."""
    params = next(m for m in yaml_mutants(PARAMS_TEXT, "params", *N) if m.name.startswith("truncate"))
    (tmp_path / "params.yaml").write_bytes(params.data)
    judgments = [Mutant("overflow", jsonl_bytes([{**JUDGMENTS[0], "target": {"false": 0, "true": 10 ** 400}}]))]
    judgments += [m for m in json_mutants(JUDGMENTS, "s1mb:metrics", *N, jsonl=True) if m.name.startswith("not-utf8")][:1]
    for i, m in enumerate(judgments):
        (tmp_path / f"judgments-{i}.jsonl").write_bytes(m.data)
    before = listing(tmp_path)
    runs = {"check": ["decision_pipeline", "config", "check", "--params", str(tmp_path / "params.yaml")],
            **{f"s1mb {m.name}": ["decision_pipeline", "s1mb", "metrics", str(tmp_path / f"judgments-{i}.jsonl")]
               for i, m in enumerate(judgments)}}
    procs = {name: subprocess.Popen([sys.executable, "-m", *argv], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for name, argv in runs.items()}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        lines = err.strip().splitlines()
        assert proc.returncode == 2 and lines and "Traceback" not in err, f"{name}: exit {proc.returncode}:\n{err[-2000:]}"
        if name.startswith("s1mb"):
            assert not out and len(lines) == 1 and "judgments-" in lines[0], f"{name}: {out[:200]!r} {lines}"
        else:
            assert all(line.startswith(("ERROR: ", "[check] ")) for line in lines), f"{name}: {lines}"
            assert "params.yaml" in lines[0], lines
    assert listing(tmp_path) == before, "a refused input left a file behind or changed one"

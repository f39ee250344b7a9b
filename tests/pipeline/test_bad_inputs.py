"""Malformed inputs across the stages: each fails at once, with one line naming the culprit, writing nothing.

Why: a person running `dvc repro` after editing params or dropping in a file must
see "what is wrong, where, how to fix it" — not a traceback, not a silent run on
0 items. Every case runs the stage's real entry point: the first case of each light
stage (items, ingest, select_chains, choose_lr, s1mb_data) as a `python -m
stages.<name>` subprocess, so the command line itself is proven once per stage;
every other case in-process through the same `main([...])` that command runs (one
import instead of a fresh interpreter per case). Each asserts exit code 2, exactly one stderr
line `error: ...` containing the file/key/id at fault, and that nothing appeared
under the case's `out/` directory (or an input it resumes from is unchanged).
docs/reliability.md "Reliability: bad input" lists this table.
"""
from __future__ import annotations

import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from decision_pipeline.common.io import write_table
from decision_pipeline.common.params import NO_PATH, from_dict
from decision_pipeline.curation.documents import DEV_SCHEMA, POOL_SCHEMA
from decision_pipeline.decision.generate.generation import GenerateParams, log_fingerprint
from decision_pipeline.questions.splits import ItemsParams, build_items
from decision_pipeline.questions.schema import QUESTION_SCHEMA
from decision_pipeline.common.profiles import dump, merged_profile

ROOT = Path(__file__).resolve().parents[2]
MICRO = merged_profile("micro", ROOT)
SUBPROCESS_STAGES = {"items", "ingest", "select_chains", "choose_lr", "s1mb_data"}  # no torch import
QUESTION = {"id": "ext-1", "task": "choice", "question": "Which is larger, 3 or 5?", "gold": "b",
            "options": [{"id": "a", "text": "3"}, {"id": "b", "text": "5"}]}


@dataclass
class Inputs:
    """Valid inputs shared by the cases (built once per module, never written to by a case)."""
    root: Path
    items: Path
    pool: Path
    dev: Path
    model: str
    wrong_tok_model: Path


@dataclass
class Case:
    stage: str
    argv: list[str]
    expect: tuple[str, ...]  # substrings of the one stderr line: the culprit and the key/file/id
    unchanged: list[Path] = field(default_factory=list)  # inputs a resuming stage must leave as they were


# ------------------------------------------------------------------ building inputs

def write_params(tmp: Path, changes: dict | None = None, edit: Callable[[dict], None] | None = None) -> str:
    """The micro profile with dotted-key `changes` (`{"items.families": []}`) or an `edit` of the dict."""
    data = json.loads(json.dumps(MICRO))
    for dotted, value in (changes or {}).items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    if edit:
        edit(data)
    path = tmp / f"params-{len(list(tmp.glob('params-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def write_jsonl(path: Path, rows: list, raw_lines: dict[int, str] | None = None) -> str:
    """Rows as JSONL; `raw_lines` replaces line i (0-based) with raw text (a torn or corrupt line)."""
    lines = [json.dumps(r) for r in rows]
    for i, text in (raw_lines or {}).items():
        lines[i] = text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def truncated(src: Path, dest: Path) -> str:
    """The first half of a valid file: what a killed copy or a full disk leaves."""
    data = src.read_bytes()
    dest.write_bytes(data[: len(data) // 2])
    return str(dest)


def closed_port() -> int:
    """A 127.0.0.1 port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chain(question_id: str, sample: int = 0) -> dict:
    return {"id": f"{question_id}:teacher:{sample}", "question_id": question_id, "source": "teacher",
            "sample": sample, "text": "<think>\nsteps\n</think>\nAnswer: A", "token_ids": [1, 2],
            "finish_reason": "stop", "n_tokens": 2}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tiny_dir) -> Inputs:
    root = tmp_path_factory.mktemp("bad_inputs")
    rows, _ = build_items(from_dict(ItemsParams, MICRO["items"], "items"), MICRO["base"]["seed"])
    write_table(root / "items.parquet", rows, QUESTION_SCHEMA)
    docs = [{"id": f"d{i}", "text": f"document {i} about markets and weather", "safety_score": 0,
             "meta_json": "{}"} for i in range(4)]
    write_table(root / "pool.parquet", docs, POOL_SCHEMA)
    write_table(root / "dev.parquet", [{"id": "v1", "text": "held out text", "register": "news"}], DEV_SCHEMA)
    wrong = root / "wrong_tok_model"
    shutil.copytree(tiny_dir, wrong)
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(wrong))
    tok.add_tokens([f"extra{i}" for i in range(64)])  # more tokens than the model has embedding rows
    tok.save_pretrained(str(wrong))
    return Inputs(root, root / "items.parquet", root / "pool.parquet", root / "dev.parquet", tiny_dir, wrong)


# ------------------------------------------------------------------ the cases, per stage

def items_case(tmp: Path, expect: tuple[str, ...], changes: dict | None = None,
               edit: Callable[[dict], None] | None = None, text: Callable[[str], str] | None = None) -> Case:
    """The items stage on the micro params with `changes`/`edit` applied (or its YAML text rewritten)."""
    out, params = tmp / "out", write_params(tmp, changes, edit)
    if text:
        Path(params).write_text(text(dump(merged_profile("micro", ROOT))))
    return Case("items", ["--params", params, "--out", str(out / "items.parquet"),
                          "--metrics", str(out / "items.json")], expect)


def external_case(tmp: Path, expect: tuple[str, ...], path: str) -> Case:
    return items_case(tmp, expect, {"items.external": path})


def external_parquet(tmp: Path, rows: list[dict], name: str = "questions.parquet") -> str:
    path = tmp / name
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def parquet_question(**drop_or_set) -> dict:
    row = {**QUESTION, "options_json": json.dumps(QUESTION["options"])}
    del row["options"]
    row.update(drop_or_set)
    return {k: v for k, v in row.items() if v is not None}


def ingest_case(tmp: Path, expect: tuple[str, ...], changes: dict) -> Case:
    out = tmp / "out"
    return Case("ingest", ["--params", write_params(tmp, changes), "--out-pool", str(out / "pool.parquet"),
                           "--out-dev", str(out / "dev.parquet"), "--out-heldout", str(out / "heldout.parquet"), "--out-tune", str(out / "tune.parquet"),
                           "--metrics", str(out / "ingest.json")], expect)


def tokenizer_case(tmp: Path, inp: Inputs, expect: tuple[str, ...], pool: str | None = None,
                   items: str | None = None) -> Case:
    out = tmp / "out"
    return Case("tokenizer", ["--params", write_params(tmp), "--pool", pool or str(inp.pool),
                              "--items", items or str(inp.items), "--out", str(out / "tokenizer"),
                              "--metrics", str(out / "tokenizer.json")], expect)


def items_with(tmp: Path, inp: Inputs, transform: Callable[[pa.Table], pa.Table]) -> str:
    path = tmp / "items.parquet"
    pq.write_table(transform(pq.read_table(inp.items)), path)
    return str(path)


def pretrain_case(tmp: Path, inp: Inputs, expect: tuple[str, ...], changes: dict | None = None) -> Case:
    out, selection = tmp / "out", tmp / "selection"
    selection.mkdir()
    (selection / "selection.json").write_text(json.dumps({"ids": ["d0", "d9"]}))  # d9: not in the pool
    return Case("pretrain", ["curated", "--params", write_params(tmp, changes), "--selection", str(selection),
                             "--pool", str(inp.pool), "--heldout", str(inp.dev), "--tokenizer", inp.model,
                             "--out", str(out / "model"), "--plot", str(out / "loss.json"),
                             "--metrics", str(out / "pretrain.json"), "--timings", str(out / "timings.json"),
                             "--work", str(out / "work")], expect)


def base_model_case(tmp: Path, inp: Inputs, expect: tuple[str, ...], path: str) -> Case:
    out = tmp / "out"
    params = write_params(tmp, {"base_model.source": "path", "base_model.path": path})
    return Case("base_model", ["--params", params, "--pretrained", inp.model, "--items", str(inp.items),
                               "--out", str(out / "base"), "--metrics", str(out / "base_model.json")], expect)


GEN_SMALL = {"generate.max_questions": 3, "generate.k": 1, "generate.max_new_tokens": 4, "generate.chunk": 3}


def generate_case(tmp: Path, inp: Inputs, expect: tuple[str, ...], changes: dict,
                  log_dir: Path | None = None) -> Case:
    out = tmp / "out"
    return Case("generate", ["--params", write_params(tmp, {**GEN_SMALL, **changes}), "--model", inp.model,
                             "--items", str(inp.items), "--out", str(log_dir or out / "generate"),
                             "--metrics", str(out / "generate.json"), "--timings", str(out / "timings.json")], expect)


def torn_resume_case(tmp: Path, inp: Inputs) -> Case:
    """A log of this very run (fingerprint matches) with a torn line in the middle, not at the end."""
    params = write_params(tmp, GEN_SMALL)
    log_dir = tmp / "generate"
    log_dir.mkdir()
    p = from_dict(GenerateParams, yaml.safe_load(Path(params).read_text())["generate"], "generate")
    (log_dir / "fingerprint.txt").write_text(log_fingerprint(p, MICRO["base"]["seed"], inp.model) + "\n")
    write_jsonl(log_dir / "chains.jsonl", [chain("q1"), chain("q2"), chain("q3")], {1: '{"id": "q2:tea'})
    case = generate_case(tmp, inp, ("chains.jsonl:2:", "malformed JSON", "remove the line"), {}, log_dir)
    case.unchanged = [log_dir / "chains.jsonl", log_dir / "fingerprint.txt"]
    return case


def pool_question_ids(inp: Inputs) -> list[str]:
    table = pq.read_table(inp.items)
    return [r["id"] for r in table.to_pylist() if r["split"] == "pool"]


def select_case(tmp: Path, inp: Inputs, expect: tuple[str, ...], records: list, raw: dict | None = None,
                changes: dict | None = None) -> Case:
    out = tmp / "out"
    chains = write_jsonl(tmp / "chains.jsonl", records, raw)
    return Case("select_chains", ["--params", write_params(tmp, changes), "--chains", chains, "--items",
                                  str(inp.items), "--out", str(out / "kept.jsonl"), "--metrics",
                                  str(out / "select.json")], expect)


def choose_case(tmp: Path, expect: tuple[str, ...], files: dict[str, str], changes: dict | None = None) -> Case:
    sweep = tmp / "sweep"
    sweep.mkdir()
    for name, text in files.items():
        (sweep / name).write_text(text)
    return Case("choose_lr", ["--params", write_params(tmp, changes), "--sweep-dir", str(sweep),
                              "--out", str(tmp / "out" / "choose_lr.json")], expect)


def sft_case(tmp: Path, inp: Inputs, expect: tuple[str, ...], changes: dict) -> Case:
    out = tmp / "out"
    return Case("sft", ["--params", write_params(tmp, changes), "--base", inp.model, "--items", str(inp.items),
                        "--kept", str(tmp / "kept.jsonl"), "--chains", str(tmp / "chains.jsonl"),
                        "--chosen", str(tmp / "choose_lr.json"), "--work", str(out / "work"),
                        "--out", str(out / "sft"), "--metrics", str(out / "sft.json"), "--plots", str(out / "plots"),
                        "--timings", str(out / "timings.json")],
                expect)


def calibrate_case(tmp: Path, inp: Inputs, expect: tuple[str, ...], model: str) -> Case:
    out = tmp / "out"
    return Case("calibrate", ["--params", write_params(tmp), "--model", model, "--items", str(inp.items),
                              "--out", str(out / "calibrate"), "--metrics", str(out / "calibrate.json")], expect)


def evaluate_case(tmp: Path, inp: Inputs, expect: tuple[str, ...], temps: str) -> Case:
    out = tmp / "out"
    (tmp / "temperatures.json").write_text(temps)
    return Case("evaluate", ["--params", write_params(tmp), "--model", inp.model,
                             "--temps", str(tmp / "temperatures.json"), "--items", str(inp.items),
                             "--out", str(out / "evaluate"), "--metrics", str(out / "evaluate.json"),
                             "--plots", str(out / "plots")], expect)


def s1mb_data_case(tmp: Path, inp: Inputs, expect: tuple[str, ...], changes: dict) -> Case:
    out = tmp / "out"
    return Case("s1mb_data", ["--params", write_params(tmp, changes), "--items", str(inp.items),
                              "--out", str(out / "bench"), "--metrics", str(out / "s1mb_data.json")], expect)


def _add_misspelt_section(d: dict) -> None:
    """What `dvc exp run -S itmes.per_cell=4` does: a new section beside the real `items`."""
    d["itmes"] = {"per_cell": 4}


def _jsonl(t: Path, rows: list, raw: dict | None = None) -> str:
    return write_jsonl(t / "questions.jsonl", rows, raw)


def _bytes(t: Path, data: bytes) -> str:
    path = t / "questions.jsonl"
    path.write_bytes(data)
    return str(path)


def _dir(t: Path) -> str:
    (t / "questions").mkdir()
    return str(t / "questions")


NAN_TARGET = json.dumps(QUESTION)[:-1] + ', "target": {"a": NaN, "b": 1.0}}'


def all_eval(table: pa.Table) -> pa.Table:
    """Every question in the eval split: the pool split is empty."""
    return table.set_column(table.schema.get_field_index("split"), "split", pa.array(["eval"] * table.num_rows))


CASES: dict[str, Callable[[Path, Inputs], Case]] = {
    # ---- params: typos, wrong types, empty sets, silent zeros (items stage: the first to run)
    "params-typo-key": lambda t, i: items_case(
        t, ("items.per_cel: unknown key",), edit=lambda d: d["items"].update(per_cel=d["items"].pop("per_cell"))),
    "params-wrong-type": lambda t, i: items_case(
        t, ("items.per_cell: expected an integer", "'many'"), {"items.per_cell": "many"}),
    "params-unknown-section": lambda t, i: items_case(
        t, ("section 'itmes' is unknown", "did you mean 'items'"), edit=_add_misspelt_section),
    "params-empty-families": lambda t, i: items_case(t, ("items.families is empty",), {"items.families": []}),
    "params-splits-not-summing-to-1": lambda t, i: items_case(
        t, ("items.splits", "summing to 1"), {"items.splits.pool": 0.9}),
    "params-not-yaml": lambda t, i: items_case(
        t, (".yaml:", ": not valid YAML (did not find expected"), text=lambda y: y.replace("per_cell: 8", "per_cell: [8")),
    "params-typo-in-register-weights": lambda t, i: ingest_case(
        t, ("ingest.register_weights.forun: unknown key",), {"ingest.register_weights": {"forun": 0.6, "news": 0.4}}),
    "params-empty-dev-registers": lambda t, i: ingest_case(
        t, ("ingest.dev_registers is empty",), {"ingest.dev_registers": []}),
    "params-pretrain-lr-0": lambda t, i: pretrain_case(t, i, ("pretrain.lr: expected a value > 0",), {"pretrain.lr": 0}),
    "params-empty-lr-sweep": lambda t, i: choose_case(t, ("lr_sweep.lrs is empty",), {}, {"lr_sweep.lrs": []}),
    "params-lr-sweep-rate-0": lambda t, i: choose_case(
        t, ("lr_sweep.lrs: expected a value > 0",), {}, {"lr_sweep.lrs": [0.0, 0.001]}),
    "params-sft-choice-typo": lambda t, i: sft_case(
        t, i, ("sft.lr_source: 'fixd' is not one of sweep, fixed",), {"sft.lr_source": "fixd"}),
    "params-generate-k-0": lambda t, i: generate_case(t, i, ("generate.k: expected a value >= 1",), {"generate.k": 0}),
    # ---- external question files (items.external)
    "external-missing-file": lambda t, i: external_case(
        t, ("nowhere.jsonl: file not found", "items.external"), str(t / "nowhere.jsonl")),
    "external-torn-jsonl-line": lambda t, i: external_case(
        t, ("questions.jsonl:2: malformed JSON",), _jsonl(t, [QUESTION, QUESTION], {1: '{"id": "ext-2", "task'})),
    "external-options-as-strings": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "field 'options' entry 1: expected a JSON object (option), got str"),
        _jsonl(t, [{**QUESTION, "options": ["3", "5"]}])),
    "external-non-integer-level": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "field 'level' must be an integer, got str 'hard'"),
        _jsonl(t, [{**QUESTION, "level": "hard"}])),
    "external-nan-probability": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "field 'target' entry 'a' must be a finite number"), _jsonl(t, [{}], {0: NAN_TARGET})),
    "external-duplicate-id": lambda t, i: external_case(
        t, ("questions.jsonl", "id 'ext-1' occurs more than once"), _jsonl(t, [QUESTION, QUESTION])),
    "external-unknown-task": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "task 'multi' is not one of"), _jsonl(t, [{**QUESTION, "task": "multi"}])),
    "external-truncated-parquet": lambda t, i: external_case(
        t, ("bad.parquet: unreadable Parquet",),
        truncated(Path(external_parquet(t, [parquet_question()])), t / "bad.parquet")),
    "external-parquet-missing-column": lambda t, i: external_case(
        t, ("questions.parquet:row 1", "missing 'gold'"), external_parquet(t, [parquet_question(gold=None)])),
    # strict records (common/records.py): bytes, types, sizes, unknown fields, empty and odd paths
    "external-not-utf8": lambda t, i: external_case(
        t, ("questions.jsonl:2: not UTF-8",), _bytes(t, json.dumps(QUESTION).encode() + b"\n" + b'{"id": "x\xff"}\n')),
    "external-option-value-not-a-number": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "option field 'value' must be a number, got str 'big'"),
        _jsonl(t, [{**QUESTION, "options": [{"id": "a", "value": "big"}, {"id": "b", "value": 2}]}])),
    "external-huge-level": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "field 'level' must be <= 1000"), _jsonl(t, [{**QUESTION, "level": 10 ** 30}])),
    "external-question-as-object": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "field 'question' must be a string, got dict"),
        _jsonl(t, [{**QUESTION, "question": {"text": "Which?"}}])),
    "external-nan-option-value": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "option field 'value' must be a finite number, got nan"),
        _jsonl(t, [{}], {0: json.dumps(QUESTION)[:-1].replace('"text": "3"}', '"text": "3", "value": NaN}') + "}"})),
    "external-misspelt-field": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "field 'tagret' is unknown (did you mean 'target'?)"),
        _jsonl(t, [{**QUESTION, "tagret": {"a": 0.2, "b": 0.8}}])),
    "external-question-too-long": lambda t, i: external_case(
        t, ("questions.jsonl:1:", "over the limit of 100,000"), _jsonl(t, [{**QUESTION, "question": "x" * 200_000}])),
    "external-directory": lambda t, i: external_case(t, ("is a directory", "items.external"), _dir(t)),
    "external-empty-file": lambda t, i: external_case(t, ("questions.jsonl: file is empty", "items.external"),
                                                       _bytes(t, b"")),
    "external-blank-lines-only": lambda t, i: external_case(t, ("holds no question records",), _bytes(t, b"\n\n")),
    "external-empty-path": lambda t, i: items_case(t, ("items.external: empty path", "configs/external/none"),
                                                    {"items.external": ""}),
    "params-infinite-weight": lambda t, i: ingest_case(
        t, ("ingest.register_weights", "finite number"), {"ingest.register_weights": {"news": float("inf"), "qa": 1.0}}),
    "params-all-weights-zero": lambda t, i: ingest_case(
        t, ("ingest.register_weights", "positive sum"),
        {"ingest.register_weights": {"news": 0.0, "encyclopedic": 0.0, "qa": 0.0, "forum": 0.0, "reasoning": 0.0}}),
    "params-typo-in-noise-weights": lambda t, i: ingest_case(
        t, ("ingest.noise_weights.mojibak: unknown key",), {"ingest.noise_weights": {"mojibak": 0.1, "junk": 0.9}}),
    "params-negative-noise-weight": lambda t, i: ingest_case(
        t, ("ingest.noise_weights", "expected a value >= 0"), {"ingest.noise_weights": {"junk": -0.1, "short": 1.0}}),
    "params-all-noise-weights-zero": lambda t, i: ingest_case(
        t, ("ingest.noise_weights", "positive sum"), {"ingest.noise_weights": {"junk": 0.0, "short": 0.0}}),
    "params-n-docs-unbounded": lambda t, i: ingest_case(
        t, ("ingest.n_docs: expected a value <= 5000000",), {"ingest.n_docs": 10 ** 12}),
    "params-per-cell-unbounded": lambda t, i: items_case(
        t, ("items.per_cell: expected a value <= 100000",), {"items.per_cell": 10 ** 7}),
    "params-duplicate-family": lambda t, i: items_case(
        t, ("items.families[1]: 'keyword' is listed twice",), {"items.families": ["keyword", "keyword"]}),
    "params-empty-file": lambda t, i: items_case(t, (".yaml: expected a mapping of sections",), text=lambda y: ""),
    # ---- external document pools (ingest.external_pool)
    "pool-duplicate-ids": lambda t, i: ingest_case(
        t, ("pool.jsonl", "duplicate id 'p1'"),
        {"ingest.external_pool": write_jsonl(t / "pool.jsonl", [{"id": "p1", "text": "a"}, {"id": "p1", "text": "b"}])}),
    "pool-parquet-missing-column": lambda t, i: ingest_case(
        t, ("pool.parquet", "lacks column 'text'"),
        {"ingest.external_pool": external_parquet(t, [{"id": "p1"}], "pool.parquet")}),
    "pool-empty-file": lambda t, i: ingest_case(
        t, ("pool.jsonl: the pool is empty",), {"ingest.external_pool": write_jsonl(t / "pool.jsonl", [])}),
    # ---- stage inputs: corrupt tables, missing columns, empty splits, foreign ids
    "tokenizer-truncated-pool": lambda t, i: tokenizer_case(
        t, i, ("pool.parquet: unreadable Parquet",), pool=truncated(i.pool, t / "pool.parquet")),
    "tokenizer-items-missing-column": lambda t, i: tokenizer_case(
        t, i, ("items.parquet: schema", "differs from the declared one"),
        items=items_with(t, i, lambda tb: tb.drop(["trace"]))),
    "tokenizer-empty-pool-split": lambda t, i: tokenizer_case(
        t, i, ("items.parquet: no questions in split 'pool'",), items=items_with(t, i, all_eval)),
    "pretrain-selection-id-not-in-pool": lambda t, i: pretrain_case(
        t, i, ("selection.json: document id 'd9' is not in the pool",)),
    # ---- models and endpoints
    "base-model-missing-directory": lambda t, i: base_model_case(
        t, i, ("no-such-model: model directory not found", "base_model.path"), str(t / "no-such-model")),
    "base-model-path-none": lambda t, i: base_model_case(t, i, ("base_model.path names no model",), NO_PATH),
    "base-model-wrong-tokenizer": lambda t, i: base_model_case(
        t, i, ("wrong_tok_model: the tokenizer has", "vocab_size is"), str(i.wrong_tok_model)),
    "calibrate-missing-model": lambda t, i: calibrate_case(
        t, i, ("no-such-model: not a model directory",), str(t / "no-such-model")),
    "generate-teacher-unreachable": lambda t, i: generate_case(
        t, i, ("is unreachable", "generate.teacher_base_url"),
        {"generate.teacher": "openai", "generate.teacher_base_url": f"http://127.0.0.1:{closed_port()}/v1",
         "generate.teacher_model": "m"}),
    "generate-torn-line-in-resumed-log": torn_resume_case,
    "s1mb-data-local-without-dir": lambda t, i: s1mb_data_case(
        t, i, ("s1mb_data.local_dir",), {"s1mb_data.source": "local"}),
    "s1mb-data-unknown-bench-source": lambda t, i: s1mb_data_case(
        t, i, ("s1mb_data.bench_source",), {"s1mb_data.bench_source": "eval"}),
    # ---- chain logs (select_chains)
    "chains-torn-middle-line": lambda t, i: select_case(
        t, i, ("chains.jsonl:2: malformed JSON",), [chain(q) for q in pool_question_ids(i)[:3]], {1: '{"id": "x'}),
    "chains-record-missing-key": lambda t, i: select_case(
        t, i, ("chains.jsonl:1: chain record lacks 'question_id'",),
        [{k: v for k, v in chain("q").items() if k != "question_id"}]),
    "chains-duplicate-id": lambda t, i: select_case(
        t, i, ("chains.jsonl:2: chain id", "repeats line 1"), [chain(pool_question_ids(i)[0])] * 2),
    "chains-unknown-question": lambda t, i: select_case(
        t, i, ("chains.jsonl", "unknown question 'ghost-1'"), [chain("ghost-1")]),
    "chains-empty": lambda t, i: select_case(t, i, ("chains.jsonl", "no chain was generated"), []),
    "chains-invalid-lookup-regex": lambda t, i: select_case(  # make check names it too (#33.6)
        t, i, ("select_chains.lookup_patterns", "'(unclosed' is not a valid regex"),
        [chain(q) for q in pool_question_ids(i)[:2]], changes={"select_chains.lookup_patterns": ["(unclosed"]}),
    # ---- files saved by common editors (common/textfile.py: UTF-8 without a BOM)
    "external-utf8-bom": lambda t, i: external_case(
        t, ("questions.jsonl: is UTF-8 with a byte-order mark (BOM)", "save it as UTF-8 without"),
        _bytes(t, b"\xef\xbb\xbf" + json.dumps(QUESTION).encode() + b"\n")),
    "external-utf16": lambda t, i: external_case(
        t, ("questions.jsonl: is UTF-16 (little-endian) with a byte-order mark",),
        _bytes(t, b"\xff\xfe" + (json.dumps(QUESTION) + "\n").encode("utf-16-le"))),
    # ---- sweep results and temperatures
    "sweep-nan-nll": lambda t, i: choose_case(
        t, ("0.001.json: dev.nll is nan",),
        {"0.001.json": '{"dev": {"nll": NaN}}', "0.003.json": '{"dev": {"nll": 1.0}}'}),
    "sweep-corrupt-json": lambda t, i: choose_case(
        t, ("0.003.json:1: not valid JSON",), {"0.001.json": '{"dev": {"nll": 1.0}}', "0.003.json": '{"dev": '}),
    "temperatures-nan": lambda t, i: evaluate_case(
        t, i, ("temperatures.json: readout.choice is nan",), '{"readout": {"choice": NaN}, "post_chain": {}}'),
    "temperatures-zero": lambda t, i: evaluate_case(
        t, i, ("temperatures.json: post_chain.score is 0",), '{"readout": {}, "post_chain": {"score": 0}}'),
}


RAN_AS_COMMAND: set[str] = set()  # light stages whose `python -m stages.<name>` already ran a case here


def run_stage(case: Case, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """Exit code and stderr of the stage's entry point: a subprocess for the first case of each light stage,
    the stage's `main(argv)` in this process (from the repository root, as the subprocess) for the rest."""
    if case.stage in SUBPROCESS_STAGES and case.stage not in RAN_AS_COMMAND:
        RAN_AS_COMMAND.add(case.stage)
        env = {**os.environ, "PIPELINE_QUIET": "1", "HF_HUB_OFFLINE": "1"}
        proc = subprocess.run([sys.executable, "-m", f"stages.{case.stage}", *case.argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stderr
    if case.stage in SUBPROCESS_STAGES:
        monkeypatch.chdir(ROOT)
    capsys.readouterr()
    rc = importlib.import_module(f"stages.{case.stage}").main(case.argv)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_fails_with_one_line_and_writes_nothing(name, tmp_path, inputs, capsys, monkeypatch):
    case = CASES[name](tmp_path, inputs)
    before = {p: p.read_bytes() for p in case.unchanged}
    rc, stderr = run_stage(case, capsys, monkeypatch)
    lines = stderr.strip().splitlines()
    assert rc == 2, f"{name}: exit {rc}, stderr:\n{stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{name}: stderr is not one line:\n{stderr[-2000:]}"
    for words in case.expect:
        assert words in lines[0], f"{name}: {words!r} not in {lines[0]!r}"
    assert not (tmp_path / "out").exists(), f"{name}: wrote {sorted(map(str, (tmp_path / 'out').rglob('*')))}"
    assert {p: p.read_bytes() for p in case.unchanged} == before


def test_there_are_at_least_60_cases():
    assert len(CASES) >= 60


def test_removing_a_torn_line_from_the_chain_log_keeps_record_order(tmp_path, inputs, capsys):
    """The repair path: a torn middle line stops generate naming file:line; once the line is removed, the
    rerun regenerates that one record and the log is byte-identical to the uninterrupted one
    (`canonical_order` sorts by question, source, sample, never by position in the file)."""
    from stages import generate

    params = write_params(tmp_path, {**GEN_SMALL, "generate.max_questions": 4, "generate.chunk": 2})
    argv = ["--params", params, "--model", inputs.model, "--items", str(inputs.items),
            "--metrics", str(tmp_path / "generate.json"), "--timings", str(tmp_path / "timings.json")]
    assert generate.main(argv + ["--out", str(tmp_path / "clean")]) == 0
    clean = (tmp_path / "clean" / "chains.jsonl").read_text()
    lines = clean.splitlines(keepends=True)
    assert len(lines) >= 6
    shutil.copytree(tmp_path / "clean", tmp_path / "repaired")
    log = tmp_path / "repaired" / "chains.jsonl"
    log.write_text("".join(lines[:2]) + lines[2][:25] + "\n" + "".join(lines[3:]))
    capsys.readouterr()
    assert generate.main(argv + ["--out", str(tmp_path / "repaired")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "chains.jsonl:3: malformed JSON" in error and "remove the line" in error
    log.write_text("".join(lines[:2]) + "".join(lines[3:]))  # the person removes the torn line
    assert generate.main(argv + ["--out", str(tmp_path / "repaired")]) == 0
    assert log.read_text() == clean

"""What the bad-input fuzz (test_fuzz_inputs.py, #33.9) found, kept as named cases: each was a traceback.

Why separate and hand-built: the seeded draw finds a fault once; a named case keeps it fixed even when
the draw changes (another seed, more cases), and says in a line what the reader used to do.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

from decision_pipeline.bench.s1mb import case_from_row, read_rows
from decision_pipeline.bench.s1mb.cli import InputError, metrics_from_jsonl
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.bpe import load_tokenizer
from decision_pipeline.lm.weights import check_weights
from decision_pipeline.preflight.checks import check_reviews
from decision_pipeline.preflight.plan import read_shape
from decision_pipeline.questions.schema import load_external_questions
from tests.bench.s1mb_helpers import mixed_row
from tests.pipeline.fuzz_helpers import json_bytes, jsonl_bytes
from tests.pipeline.test_bad_inputs import QUESTION
from tests.pipeline.test_fuzz_inputs import JUDGMENTS, REVIEWS

HUGE = 10 ** 400  # JSON allows it; float() of it overflows


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _model(tmp: Path, tiny_dir: str, name: str, edit: Callable[[bytes], bytes]) -> Path:
    """A copy of the tiny model directory with one file edited."""
    model = tmp / "model"
    shutil.copytree(tiny_dir, model)
    _write(model / name, edit((model / name).read_bytes()))
    return model


def _config(**changes: object) -> Callable[[bytes], bytes]:
    return lambda data: json_bytes({**json.loads(data), **changes})


def _row(edit: Callable[[dict], object]) -> dict:
    row = mixed_row("case-1")
    edit(row)
    return row


def _s1mb_metrics(path: Path) -> None:
    try:
        metrics_from_jsonl(path)
    except InputError as exc:  # the CLI prints it as its one stderr line, exit 2
        raise PipelineError(str(exc)) from None


def _reviews_preflight(tmp: Path) -> None:
    _write(tmp / "e.jsonl", jsonl_bytes(REVIEWS).decode().encode("utf-16"))
    lines = check_reviews({"reviews": {"source": "import", "import_path": "e.jsonl"}}, tmp)
    if lines:
        raise PipelineError("\n".join(lines))


Case = Callable[[Path, str], tuple[Callable[[], object], tuple[str, ...]]]
FOUND: dict[str, Case] = {  # name -> (the reader on a built input, words of its one-line refusal)
    "s1mb-metrics-int-beyond-float": lambda t, m: (lambda: _s1mb_metrics(_write(t / "j.jsonl", jsonl_bytes(
        [{**JUDGMENTS[0], "target": {"false": 0, "true": HUGE}}]))), ("j.jsonl:1", "not finite")),
    "s1mb-dataset-not-utf8": lambda t, m: (lambda: read_rows(_write(t / "rows.jsonl", b'{"case_id": "\xff"}\n').parent),
                                          ("rows.jsonl", "line 1: byte 14", "not UTF-8")),
    "s1mb-dataset-utf16": lambda t, m: (lambda: read_rows(_write(t / "rows.jsonl", "{}\n".encode("utf-16")).parent),
                                       ("rows.jsonl", "UTF-16")),
    "s1mb-dataset-target-ids-a-number": lambda t, m: (lambda: case_from_row(_row(
        lambda r: r["targets"][0].update(ids=7))), ("case-1", "target ids must be a list of strings")),
    "s1mb-dataset-decision-id-an-object": lambda t, m: (lambda: case_from_row(_row(
        lambda r: r["targets"][0].update(decision_id={}))), ("case-1", "a string decision_id")),
    "s1mb-dataset-criteria-a-number": lambda t, m: (lambda: case_from_row(_row(
        lambda r: r["input"]["decisions"][0].update(criteria=5))), ("case-1", "every criterion needs a string id")),
    "s1mb-dataset-value-beyond-float": lambda t, m: (lambda: case_from_row(_row(
        lambda r: r["input"]["decisions"][2]["criteria"][1].update(value=HUGE))), ("'hi' value", "not a finite")),
    "external-target-int-beyond-float": lambda t, m: (lambda: load_external_questions(_write(t / "q.jsonl", jsonl_bytes(
        [{**QUESTION, "target": {"a": 0, "b": HUGE}}]))), ("q.jsonl:1", "entry 'b' must be a finite number")),
    "preflight-reviews-export-utf16": lambda t, m: (lambda: _reviews_preflight(t),
                                                   ("reviews.import_path", "e.jsonl", "UTF-16")),
    "plan-config-truncated": lambda t, m: (lambda: read_shape(_model(t, m, "config.json", lambda d: d[:40])),
                                          ("config.json", "not valid JSON")),
    "plan-config-size-empty-string": lambda t, m: (lambda: read_shape(_model(t, m, "config.json", _config(hidden_size=""))),
                                                  ("config.json", "whole number")),
    "stage-tokenizer-config-wrong-type": lambda t, m: (lambda: load_tokenizer(
        _model(t, m, "config.json", _config(architectures=0))), ("model", "no usable tokenizer")),
    "weights-unknown-dtype": lambda t, m: (lambda: check_weights(
        _model(t, m, "model.safetensors", lambda d: d.replace(b'"F32"', b'"F3B"', 1))),
        ("model.safetensors", "safetensors cannot read its header")),
    "weights-config-hidden-size-0": lambda t, m: (lambda: check_weights(
        _model(t, m, "config.json", _config(hidden_size=0))), ("config.json", "transformers cannot build the model")),
}


@pytest.mark.parametrize("name", list(FOUND))
def test_what_the_fuzz_found_is_one_line(name: str, tmp_path: Path, tiny_dir: str) -> None:
    """Each was a traceback (OverflowError, TypeError, UnicodeDecodeError, JSONDecodeError, SafetensorError,
    ZeroDivisionError, StrictDataclassFieldValidationError); now one line naming the file and the fault."""
    call, expect = FOUND[name](tmp_path, tiny_dir)
    with pytest.raises(PipelineError) as info:
        call()
    message = str(info.value)
    assert len(message.splitlines()) == 1 and all(words in message for words in expect), message


@pytest.mark.parametrize("data, words", [
    (b'{"hidden_size": "\xff"}', "line 1, byte 18 (0xff) is not UTF-8"),
    ('{"hidden_size": 8}'.encode("utf-16"), "is UTF-16 (little-endian) with a byte-order mark"),
    (b"[1, 2]", "holds a JSON list, not an object"),
])
def test_model_config_in_another_encoding_or_not_an_object_is_one_line(tmp_path, data, words):
    """model_dirs.read_config (preflight's memory plan) decoded with str.read_text: UnicodeDecodeError,
    and a list reached `.update` as an AttributeError."""
    from decision_pipeline.preflight.model_dirs import read_config
    path = _write(tmp_path / "config.json", data)
    with pytest.raises(PipelineError) as err:
        read_config(path)
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value)


@pytest.mark.parametrize("data, words", [
    (b"\xef\xbb\xbf# Charter\n", "UTF-8 with a byte-order mark"),
    (b"# Charter \xe9\n", "line 1, byte 11 (0xe9) is not UTF-8"),
])
def test_charter_file_in_another_encoding_is_one_line(tmp_path, data, words):
    """charter.load_charter read with str.read_text: a Latin-1 byte was a UnicodeDecodeError traceback."""
    from decision_pipeline.charter.charter import load_charter
    path = _write(tmp_path / "charter.md", data)
    with pytest.raises(PipelineError) as err:
        load_charter(path)
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value)

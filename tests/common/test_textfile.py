"""The one encoding rule for person-written files (common/textfile.py) and the readers that apply it.

Why: editors save with a BOM or as UTF-16, and the readers used to call that "missing front
matter", "malformed JSON ... fix or remove the line" or a UnicodeDecodeError traceback.
"""
from __future__ import annotations

import codecs
import json

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.records import input_file
from decision_pipeline.common.textfile import check_head, decode, decode_line, encoding_problem, read_text

TEXT = '{"id": "q1", "question": "Is it?"}\n{"id": "q2", "question": "Or not?"}\n'


@pytest.mark.parametrize("data, expected", [
    (TEXT.encode(), None),
    (codecs.BOM_UTF8 + TEXT.encode(), "is UTF-8 with a byte-order mark (BOM)"),
    (codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"), "is UTF-16 (little-endian) with a byte-order mark"),
    (codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"), "is UTF-16 (big-endian) with a byte-order mark"),
    (codecs.BOM_UTF32_LE + TEXT.encode("utf-32-le"), "is UTF-32 (little-endian) with a byte-order mark"),
    (codecs.BOM_UTF32_BE + TEXT.encode("utf-32-be"), "is UTF-32 (big-endian) with a byte-order mark"),
    (TEXT.encode("utf-16-le"), "is UTF-16 (little-endian) text"),
    (TEXT.encode("utf-16-be"), "is UTF-16 (big-endian) text"),
    (b"abc\x00\x01\x02\x03\x04", "holds a NUL byte at byte 4: not a text file (or not UTF-8)"),
    ("caf\xe9 \u2713\n".encode(), None),  # non-ASCII UTF-8 is fine
], ids=["utf8", "utf8-bom", "utf16le-bom", "utf16be-bom", "utf32le", "utf32be", "utf16le", "utf16be", "binary",
        "non-ascii"])
def test_encoding_problem_names_each_kind(data, expected):
    assert encoding_problem(data) == expected


def test_a_non_utf8_byte_names_line_and_byte(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"first line\nsecond \xff line\n")
    with pytest.raises(PipelineError, match=r"f.txt: line 2, byte 8 \(0xff\) is not UTF-8; save the file as UTF-8"):
        read_text(path)
    with pytest.raises(PipelineError, match=r"f.txt:2: byte 8 of the line \(0xff\) is not UTF-8"):
        decode_line(b"second \xff line\n", path, 2)
    assert decode("ok\n".encode(), "x") == "ok\n"


def test_read_text_refuses_a_bom_and_reads_plain_utf8(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(codecs.BOM_UTF8 + b"hello\n")
    with pytest.raises(PipelineError, match="f.txt: is UTF-8 with a byte-order mark .*without a byte-order mark"):
        read_text(path)
    path.write_bytes(b"hello\r\n")
    assert read_text(path) == "hello\r\n"
    with pytest.raises(PipelineError, match="nope.txt: file not found"):
        read_text(tmp_path / "nope.txt")
    check_head(tmp_path / "nope.txt")  # a missing file is left to the reader's own message


@pytest.mark.parametrize("head", [codecs.BOM_UTF8, codecs.BOM_UTF16_LE])
def test_an_external_jsonl_input_with_a_bom_is_named_before_json_reads_it(tmp_path, head):
    path = tmp_path / "questions.jsonl"
    body = json.dumps({"id": "q1"}) + "\n"
    path.write_bytes(head + body.encode("utf-16-le" if head == codecs.BOM_UTF16_LE else "utf-8"))
    with pytest.raises(PipelineError, match="questions.jsonl: is UTF-(8|16).*byte-order mark") as err:
        input_file(path, "items.external")
    assert "malformed" not in str(err.value)
    path.write_text(body)
    assert input_file(path, "items.external") == path


def test_a_parquet_input_is_not_sniffed_as_text(tmp_path):
    path = tmp_path / "t.parquet"
    path.write_bytes(b"PAR1\x00\x00\x00\x15\x00")  # NULs are normal in a binary table
    assert input_file(path, "items.external") == path

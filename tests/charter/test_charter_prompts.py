"""Charter parsing, citation checks and prompt-file rules (version, {charter}, no pasted text)."""
from __future__ import annotations

from pathlib import Path

import pytest

from decision_pipeline.charter.charter import check_citations, citations, load_charter, parse_charter
from decision_pipeline.charter.prompts import load_prompt, parse_prompt
from decision_pipeline.common.errors import PipelineError


def test_charter_sections_by_id(charter):
    assert list(charter.sections)[:3] == ["1.1", "1.2", "2.1"]
    assert charter.sections["2.1"].title == "Hostile language"
    assert charter.sections["2.1"].part == "Harm avoidance"
    assert "Insults" in charter.sections["2.1"].text


def test_charter_rejects_duplicates_and_empty_sections():
    with pytest.raises(PipelineError, match="section 1.1 appears twice"):
        parse_charter("### 1.1 A\ntext\n### 1.1 B\nmore\n", "c.md")
    with pytest.raises(PipelineError, match="section 1.2 'B' has no text"):
        parse_charter("### 1.1 A\ntext\n### 1.2 B\n\n", "c.md")


def test_citation_to_a_missing_section_names_the_culprit(charter):
    assert citations("see [2.1] and [4.2]") == ["2.1", "4.2"]
    with pytest.raises(PipelineError, match=r"my-file: cites \[7.3\] but configs/charter/charter.md has no section 7.3"):
        check_citations("First person: I would be careful [7.3].", charter, "my-file")
    with pytest.raises(PipelineError, match=r"malformed citation '\(2.1\)'"):
        check_citations("careful (2.1)", charter, "my-file")


def test_project_prompts_load_with_versions(charter):
    for name in ("small_base", "judge", "judge_v2", "gpu_small", "gpu_large", "ref_cite_right",
                 "ref_cite_nothing", "ref_summarise"):
        p = load_prompt(f"configs/prompts/{name}.md", charter)
        assert p.version >= 1
        text = p.render(charter, document="DOC", reflection="REF", safety_score=3)
        assert "[2.1] Hostile language." in text and "{charter}" not in text


def test_prompt_without_charter_placeholder_is_rejected(charter):
    with pytest.raises(PipelineError, match=r"p.md: no \{charter\} placeholder"):
        parse_prompt("---\nversion: 2\n---\nReflect on {document}.\n", charter, "p.md")


def test_prompt_with_pasted_charter_text_is_rejected(charter):
    pasted = charter.sections["2.3"].text.split(".")[0]
    with pytest.raises(PipelineError, match=r"p.md: pastes charter text \[2.3\]"):
        parse_prompt(f"---\nversion: 1\n---\n{{charter}}\nRemember: {pasted}.\n{{document}}\n", charter, "p.md")


def test_prompt_needs_a_version_and_known_placeholders(charter):
    with pytest.raises(PipelineError, match="missing front matter"):
        parse_prompt("{charter} {document}", charter, "p.md")
    with pytest.raises(PipelineError, match="needs 'version: N'"):
        parse_prompt("---\nversion: zero\n---\n{charter}", charter, "p.md")
    with pytest.raises(PipelineError, match=r"unknown placeholder \{doc\}"):
        parse_prompt("---\nversion: 1\n---\n{charter} {doc}", charter, "p.md")
    with pytest.raises(PipelineError, match=r"cites \[8.8\]"):
        parse_prompt("---\nversion: 1\n---\n{charter} e.g. [8.8] {document}", charter, "p.md")


@pytest.mark.parametrize("kind,body,expect", [
    ("reflection", "{charter}\nReflect.\n", r"p.md: a reflection prompt needs the \{document\} placeholder"),
    ("judge", "{charter}\n{document}\nScore it.\n", r"p.md: a judge prompt needs the \{reflection\} placeholder"),
    ("reflection", "{charter}\n{Document}\n", r"p.md: placeholder \{Document\} is mis-cased; write \{document\}"),
    ("judge", "{charter}\n{document}\n{REFLECTION}\n", r"p.md: placeholder \{REFLECTION\} is mis-cased"),
    ("reflection", "{charter}\n{document}\n{doc}\n", r"p.md: unknown placeholder \{doc\}"),
], ids=["reflection-no-document", "judge-no-reflection", "miscased", "miscased-upper", "unknown"])
def test_prompt_kind_requires_its_placeholders(charter, kind, body, expect):
    with pytest.raises(PipelineError, match=expect):
        parse_prompt(f"---\nversion: 1\n---\n{body}", charter, "p.md", kind)


def test_project_judge_prompts_pass_the_judge_kind(charter):
    for name in ("judge", "judge_v2"):
        assert load_prompt(f"configs/prompts/{name}.md", charter, kind="judge").version >= 1


GOOD = "---\nversion: 1\n---\n{charter}\nReflect on {document}.\n"


@pytest.mark.parametrize("data, named", [
    (b"\xef\xbb\xbf" + GOOD.encode(), "is UTF-8 with a byte-order mark (BOM); save it as UTF-8 without"),
    (b"\xff\xfe" + GOOD.encode("utf-16-le"), "is UTF-16 (little-endian) with a byte-order mark; save it as UTF-8"),
    (b"\xfe\xff" + GOOD.encode("utf-16-be"), "is UTF-16 (big-endian) with a byte-order mark"),
    (GOOD.encode("utf-16-le"), "is UTF-16 (little-endian) text; save it as UTF-8"),
    (GOOD.encode("utf-32"), "is UTF-32 (little-endian) with a byte-order mark"),
    (GOOD.replace("Reflect", "R\xe9flect").encode("latin-1"), "line 5, byte 2 (0xe9) is not UTF-8"),
], ids=["utf8-bom", "utf16le-bom", "utf16be-bom", "utf16-no-bom", "utf32", "latin1"])
def test_a_prompt_saved_by_another_editor_is_named_for_what_it_is(charter, tmp_path, data, named):
    path = tmp_path / "p.md"
    path.write_bytes(data)
    with pytest.raises(PipelineError) as err:
        load_prompt(path, charter)
    assert str(err.value).startswith(f"{path}: ") and named in str(err.value)
    assert "front matter" not in str(err.value)
    path.write_text(GOOD)
    assert load_prompt(path, charter).version == 1  # the same text saved as UTF-8 loads


def test_a_prompt_with_windows_line_endings_loads_as_the_same_prompt(charter, tmp_path):
    """CRLF is read as LF (as a text-mode read did before the encoding rule, #53): the same template, so the
    same prompts reach the model and the same reflections come back."""
    crlf, lf = tmp_path / "crlf.md", tmp_path / "lf.md"
    crlf.write_bytes(GOOD.replace("\n", "\r\n").encode())
    lf.write_bytes(GOOD.encode())
    got, want = load_prompt(crlf, charter), load_prompt(lf, charter)
    assert (got.version, got.template) == (want.version, want.template) == (1, "{charter}\nReflect on {document}.\n")
    charter_crlf = tmp_path / "charter.md"
    charter_crlf.write_bytes(Path("configs/charter/charter.md").read_bytes().replace(b"\n", b"\r\n"))
    assert load_charter(charter_crlf).text == charter.text and "\r" not in charter.text


def test_a_missing_or_directory_prompt_path_is_one_line(charter, tmp_path):
    with pytest.raises(PipelineError, match="prompt file not found; fix the prompt path"):
        load_prompt(tmp_path / "nope.md", charter)
    with pytest.raises(PipelineError, match="is a directory"):
        load_prompt(tmp_path, charter)

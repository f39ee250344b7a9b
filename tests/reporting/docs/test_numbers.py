"""Numbers in docs/ are generated from metrics/ and params.yaml, and a changed or vanished metric fails a check.

Why: docs/rl.md once said `rl_gate` passes while the committed metrics said it failed, and
docs/curation.md described a pool from an older run. Markers tie each number and verdict to its
source; these tests prove that the committed docs agree with the committed metrics, that a changed
metric or a vanished key is caught (naming doc:line and key), and that no result number is typed by hand.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.docs import numbers as dn
from decision_pipeline.reporting.docs.values import Sources, evaluate, render

ROOT = Path(__file__).resolve().parents[3]
DOCS = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))


def _copy(tmp_path: Path) -> Path:
    """A repository-like root: docs/, metrics/, params.yaml and profiles/ (what markers cite)."""
    root = tmp_path / "repo"
    for name in ("docs", "metrics", "profiles"):
        shutil.copytree(ROOT / name, root / name)
    shutil.copy2(ROOT / "params.yaml", root / "params.yaml")
    return root


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "decision_pipeline", "docs-numbers", "--root", str(root), *args],
                          capture_output=True, text=True, cwd=ROOT)


def _line_of(doc: Path, needle: str) -> int:
    return next(i + 1 for i, line in enumerate(doc.read_text().split("\n")) if needle in line)


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2))


# --- the committed state ---------------------------------------------------------------------------

def test_committed_docs_agree_with_committed_metrics():
    report = dn.scan(DOCS, ROOT)
    assert not report.errors, "\n".join(report.errors)
    assert not report.stale(), "\n".join(report.stale())


def test_no_unmarked_result_number_in_the_covered_docs():
    report = dn.scan(DOCS, ROOT)
    assert not report.unmarked, "\n".join(report.unmarked)


def test_the_converted_docs_cite_metrics():
    for doc in ("docs/rl.md", "docs/curation.md", "docs/results.md"):
        assert len(dn.MARK.findall((ROOT / doc).read_text())) >= 20, f"{doc} holds few generated numbers"


def test_the_not_yet_converted_list_only_names_docs_that_still_need_it():
    for doc in dn.NOT_YET_CONVERTED:
        assert (ROOT / doc).is_file(), f"{doc} is in NOT_YET_CONVERTED but does not exist; remove it from the list"
        left = dn.unmarked_numbers((ROOT / doc).read_text(), doc, ROOT)
        assert left, f"{doc} has no unmarked result number any more: remove it from NOT_YET_CONVERTED"


def test_rl_doc_states_the_gate_the_metrics_record():
    gate = json.loads((ROOT / "metrics/evaluate/rl.json").read_text())["rl_gate"]["passed"]
    text = (ROOT / "docs/rl.md").read_text()
    assert f"**`rl_gate` <!--m \"passes\" if evaluate/rl:rl_gate.passed else \"fails\"-->{'passes' if gate else 'fails'}<!--/m-->**" in text


# --- a changed metric, a vanished key ----------------------------------------------------------------

def _value(doc: Path, body: str) -> str:
    """The value a doc shows for the marker with this body."""
    return next(m.group("value") for m in dn.MARK.finditer(doc.read_text()) if m.group("body").strip() == body)


def test_changing_a_cited_number_fails_the_check_naming_doc_and_line(tmp_path):
    root = _copy(tmp_path)
    assert _cli(root, "--check", "docs/rl.md").returncode == 0
    old = _value(root / "docs/rl.md", "rl:reward_gain %+.3f")
    _edit_json(root / "metrics/rl.json", lambda d: d["reward_gain"].update(diff=-9.5))
    done = _cli(root, "--check", "docs/rl.md")
    line = _line_of(root / "docs/rl.md", "<!--m rl:reward_gain %+.3f-->")
    assert done.returncode == 1
    assert f"docs/rl.md:{line}: reads {old!r}, its sources give '\u22129.500 [" in done.stderr
    assert _cli(root, "docs/rl.md").returncode == 0          # regenerate in place
    assert _cli(root, "--check", "docs/rl.md").returncode == 0
    assert _value(root / "docs/rl.md", "rl:reward_gain %+.3f").startswith("\u22129.500 [")


def test_a_flipped_verdict_is_rewritten_in_words(tmp_path):
    root = _copy(tmp_path)
    passed = json.loads((root / "metrics/evaluate/rl.json").read_text())["rl_gate"]["passed"]
    _edit_json(root / "metrics/evaluate/rl.json", lambda d: d["rl_gate"].update(passed=not passed))
    _edit_json(root / "metrics/rl.json", lambda d: d["reward_gain"].update(ci_low=-5.0, ci_high=5.0))
    outcome = dn.scan(["docs/rl.md"], root).outcomes["docs/rl.md"]
    gate = 'passes' if not passed else 'fails'
    assert any(c.new == gate for c in outcome.changes), "the gate's word did not follow the metric"
    assert 'high(rl:reward_gain) < 0 else "includes zero"-->includes zero<!--/m-->' in outcome.text


def test_a_changed_param_fails_the_check(tmp_path):
    root = _copy(tmp_path)
    params = root / "params.yaml"
    old = _value(root / "docs/curation.md", "params.yaml:curate.reserve %g")
    text, n = re.subn(r"(?m)^(  reserve: ).*$", r"\g<1>0.0625", params.read_text(), count=1)
    assert n == 1 and old != "0.0625"
    params.write_text(text)
    stale = dn.scan(["docs/curation.md"], root).stale()
    assert any(f"reads {old!r}, its sources give '0.0625'" in s for s in stale), stale


def test_a_cited_key_that_no_longer_exists_is_one_line_naming_doc_line_and_key(tmp_path):
    root = _copy(tmp_path)
    before = (root / "docs/rl.md").read_text()
    _edit_json(root / "metrics/evaluate/rl.json", lambda d: d["rl_gate"].pop("passed"))
    done = _cli(root, "docs/rl.md")
    line = _line_of(root / "docs/rl.md", "evaluate/rl:rl_gate.passed")
    assert done.returncode == 2
    lines = done.stderr.strip().split("\n")
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"docs/rl.md:{line}: metrics/evaluate/rl.json has no key 'rl_gate.passed'")
    assert "point the marker at its new key or delete the claim" in lines[0]
    assert (root / "docs/rl.md").read_text() == before       # nothing written


def test_a_cited_file_that_no_longer_exists_is_one_line_per_doc(tmp_path):
    root = _copy(tmp_path)
    (root / "metrics/rl_select.json").unlink()
    done = _cli(root, "--check", "docs/rl.md")
    line = _line_of(root / "docs/rl.md", "<!--m rl_select:")
    cited = (root / "docs/rl.md").read_text().count("<!--m rl_select:")
    assert done.returncode == 2
    assert done.stderr.strip().split("\n") == [
        f"docs/rl.md:{line}: metrics/rl_select.json not found; the file was renamed or removed: cite its new path "
        f"or delete the claim (cited by {cited} markers of docs/rl.md; the first is here)"]


# --- markers and expressions -------------------------------------------------------------------------

@pytest.fixture
def sources(tmp_path) -> Sources:
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/m.json").write_text(json.dumps({
        "gain": {"diff": -0.0312, "ci_low": -0.08, "ci_high": 0.01}, "cis": {"acc_at_0.3": {"point": 0.5}},
        "rows": [{"x": 1.0, "y": 6.1, "lo": 5.9, "hi": 6.3}, {"x": 1.6, "y": 7.1, "lo": 7.0, "hi": 7.2},
                 {"x": 2.2, "y": 6.4, "lo": 6.0, "hi": 6.6}],
        "n": 1999, "flag": False, "ci": [0.25, 0.5], "zero": -0.0001}))
    (tmp_path / "params.yaml").write_text("curate:\n  reserve: 0.5\n")
    return Sources(tmp_path)


@pytest.mark.parametrize("expr,spec,want", [
    ("m:gain.diff", "+.3f", "\u22120.031"),
    ("m:gain", "+.3f", "\u22120.031 [\u22120.080, 0.010]"),
    ("m:cis.acc_at_0.3.point", ".2f", "0.50"),
    ("m:rows.-1.x", ".1f", "2.2"),
    ("m:n", None, "1,999"),
    ("m:ci", ".2f", "[0.25, 0.50]"),
    ("m:zero", "+.3f", "0.000"),
    ("m:n / 4000", ".0%", "50%"),
    ("params.yaml:curate.reserve", "g", "0.5"),
    ('"yes" if m:flag else "no"', None, "no"),
    ('direction(m:gain, "up", "down", "no change detected")', None, "no change detected"),
    ("argmax(m:rows.*.x, m:rows.*.y)", ".1f", "1.6"),
    ('words(above(m:rows.*.x, m:rows.*.lo, m:rows.0.hi), "none")', None, "1.6"),
    ("mean(last(m:rows.*.y, len(m:rows) / 3))", ".1f", "6.4"),
])
def test_marker_expressions(sources, expr, spec, want):
    assert render(evaluate(expr, sources), spec) == want


@pytest.mark.parametrize("expr,spec,says", [
    ("m:gain.dif", None, "metrics/m.json has no key 'gain.dif' ('gain' holds ci_high, ci_low, diff)"),
    ("m:rows.7.x", None, "'rows' holds a list of 3 items"),
    ("nope:x", None, "metrics/nope.json not found"),
    ("m:flag", None, "needs words"),
    ("m:gain.diff", None, "a decimal needs a format"),
    ("open(m:n)", None, "the function 'open' is not allowed"),
    ("m:n.__class__", None, "has no key"),
])
def test_bad_markers_say_what_to_do(sources, expr, spec, says):
    with pytest.raises(PipelineError, match=None) as exc:
        render(evaluate(expr, sources), spec)
    assert says in str(exc.value)


def test_regenerate_reports_each_bad_marker_with_doc_and_line(sources):
    text = "ok <!--m m:n-->1,999<!--/m-->\nbad <!--m m:gain.dif %.2f-->x<!--/m-->\nopen <!--m m:n-->1,999\n" \
           "dash <!--m m:n -- 1-->1<!--/m-->"
    out = dn.regenerate(text, "docs/x.md", sources)
    assert [e.split(":")[1] for e in out.errors] == ["2", "3", "4"]
    assert "has no key 'gain.dif'" in out.errors[0] and "without its <!--/m-->" in out.errors[1] and "'--'" in out.errors[2]


def test_markers_shown_as_code_are_examples(sources):
    text = "the form `<!--m m:gone %.2f-->0.25<!--/m-->` and\n```\n<!--m m:gone-->1<!--/m-->\n```\nreal <!--m m:n-->1<!--/m-->"
    out = dn.regenerate(text, "docs/x.md", sources)
    assert not out.errors
    assert [(c.line, c.new) for c in out.changes] == [(5, "1,999")]
    assert out.text.split("\n")[:4] == text.split("\n")[:4]


# --- what counts as a result number ------------------------------------------------------------------

@pytest.mark.parametrize("text,flagged", [
    ("accuracy 0.519 on the eval set", ["0.519"]),
    ("72% of questions", ["72%"]),
    ("1,999 documents and 49\u00d7 faster", ["1,999", "49\u00d7"]),
    ("a gain of \u22122.53 ppl", ["\u22122.53"]),
    ("3 seeds, 4 families, level 0\u20134, Qwen2, bf16, issue #34.6, \u00a74.4", []),
    ("run on 2026-12-03 with DVC 3.67.1", []),
    ("a 95% CI and 80% power", []),
    ("`temperature: 0.8` and [a link](docs/v1.2.md)", []),
    ("```\nlr: 0.002\n```", []),
    ("<!--m m:n-->1,999<!--/m--> docs", []),
    ("`<!--quoted rumour-->` shows 1,999 here", ["1,999"]),
    ("<!--quoted research-->310.7 ppl<!--/quoted-->", []),
    ("<!--measured docs/x.md 2026-12-03-->\n7.0\u20137.4 s\n<!--/measured-->", []),
])
def test_what_counts_as_a_result_number(tmp_path, text, flagged):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/x.md").write_text("")
    found = dn.unmarked_numbers(text, "docs/x.md", tmp_path)
    assert [p.split("'")[1] for p in found] == flagged


def test_measured_and_quoted_spans_must_say_by_whom_and_why(tmp_path):
    text = ("<!--measured perf/gone.py 2026-12-03-->1.5 s<!--/measured-->\n"
            "<!--measured perf/x.py-->1.5 s<!--/measured-->\n"
            "<!--quoted rumour-->2.5<!--/quoted-->\n"
            "<!--measured manual 2026-12-03-->5.5 min<!--/measured-->")
    found = dn.unmarked_numbers(text, "docs/x.md", tmp_path)
    assert [p.split(":")[1] for p in found] == ["1", "2", "3"]
    assert "names no file" in found[0] and "needs what measured it and the date" in found[1] and "research" in found[2]


def test_a_block_another_generator_owns_is_not_checked_for_unmarked_numbers(tmp_path):
    """The README's results table is written by reporting/docs/readme.py from summary.json (its own test)."""
    text = ("<!-- results-table:begin (generated) -->\n| a | 0.519 |\n<!-- results-table:end -->\n"
            "typed by hand: 0.42\n")
    problems = dn.unmarked_numbers(text, "README.md", tmp_path)
    assert len(problems) == 1 and problems[0].startswith("README.md:4: unmarked result number '0.42'")

"""Numbers in docs/ that are generated from metrics/ and params.yaml, and a check that none is typed by hand.

Why: prose typed from one run reads as true after the next run has changed every number (docs/rl.md
said `rl_gate` passes while the committed metrics said it failed). A marker names the source of each
value and the value sits between the marker's two halves, so the doc renders normally and this
module rewrites the values after a run and fails a check when one is stale:

    <!--m rl:reward_gain.diff %+.3f-->+0.209<!--/m-->                 a number (format after %)
    <!--m rl:reward_gain %+.3f-->+0.209 [0.048, 0.361]<!--/m-->       a difference with its CI
    <!--m "passes" if evaluate/rl:rl_gate.passed else "fails"-->fails<!--/m-->    a verdict
    <!--m direction(rl:reward_gain, "rises", "falls", "does not move detectably")-->rises<!--/m-->
    <!--m params.yaml:curate.overfill-->1.0<!--/m-->                  a param echoed from params.yaml

Numbers that are not results of the pipeline are wrapped, so the reader and the check know:
`<!--measured perf/bench_x.py 2026-12-03-->...<!--/measured-->` (a one-off measurement by that
script or test on that date, or `manual` for a run the text describes; it is not regenerated) and
`<!--quoted research-->...<!--/quoted-->` (`research`: the numbers of the research this pipeline
reproduces; `version`: versions of tools). Both may span lines; a value marker may not.

A result number (what the check looks for outside markers, code blocks, code spans, HTML comments
and link targets) is a decimal (`6.13`), a percentage (`72%`), a ratio (`49×`) or an integer with a
thousands separator (`1,999`). Dates (`2026-12-03`), dotted versions (`3.67.1`) and the level of a
CI or power (`95% CI`, `80% power`) are not. Bare
integers are not detected (step counts, list indices and results look alike): cite those by marker.

    python -m decision_pipeline docs-numbers README.md docs/*.md            # rewrite the values
    python -m decision_pipeline docs-numbers --check README.md docs/*.md    # exit 1 if stale or unmarked
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.reporting.docs.values import MissingFile, Sources, evaluate, render

# Docs whose numbers are not yet generated: the check skips their unmarked numbers. Shrink it as each is converted.
NOT_YET_CONVERTED = ("docs/gpu.md", "docs/review.md", "docs/performance.md")
# Docs whose numbers are definitions, not results of a run.
NOT_RESULTS = {"docs/S1MB_SCORING.md": "the S1MB scoring specification: its numbers define the metric"}
QUOTED_REASONS = ("research", "version")

MARK = re.compile(r"<!--m\s(?P<body>.*?)-->(?P<value>.*?)<!--/m-->")
OPEN = re.compile(r"<!--m\s")
FORMAT = re.compile(r"^(?P<expr>.*?)\s+%(?P<spec>\S+)$", re.S)
BLOCK = re.compile(r"<!--(?P<kind>measured|quoted)(?P<head>[^>]*?)-->(?P<inner>.*?)<!--/(?P=kind)-->", re.S)
FENCE = re.compile(r"^(?P<f>```|~~~)[^\n]*\n.*?^(?P=f)[^\n]*$", re.M | re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
# a block another generator owns (the README's results table, reporting/docs/readme.py): not typed by hand
GENERATED = re.compile(r"<!-- (?P<name>[a-z-]+):begin\b.*?-->.*?<!-- (?P=name):end -->", re.S)
CODE = re.compile(r"(`+)[^`]*?\1")
LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
VERSION = re.compile(r"\b\d+(?:\.\d+){2,}\b")
LEVEL = re.compile(r"\b\d+% (?=(?:paired |bootstrap )*(?:CIs?|confidence|power)\b)")
NUMBER = re.compile(r"(?<![\w.,/#^§\[])[+\-\u2212\u00b1]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s?%|\u00d7)?(?![\w/])")


@dataclass
class Change:
    """One marker whose value differs from what its sources give now."""

    line: int
    body: str
    old: str
    new: str


@dataclass
class Outcome:
    """A doc regenerated: its new text, the values that changed, the markers that could not be read."""

    text: str
    changes: list[Change] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def split_body(body: str) -> tuple[str, str | None]:
    """(expression, format spec or None) of a marker body."""
    m = FORMAT.match(body.strip())
    return (m.group("expr"), m.group("spec")) if m else (body.strip(), None)


def _hide_examples(line: str, store: list[str]) -> str:
    """Code spans that show a marker (`<!--m ...-->`) become placeholders, so they are not evaluated."""
    def hide(m: re.Match) -> str:
        store.append(m.group(0))
        return f"\x00{len(store) - 1}\x00"
    return CODE.sub(lambda m: hide(m) if "<!--" in m.group(0) else m.group(0), line)


def _show_examples(line: str, store: list[str]) -> str:
    return re.sub(r"\x00(\d+)\x00", lambda m: store[int(m.group(1))], line)


def regenerate(text: str, doc: str, sources: Sources) -> Outcome:
    """Every marker's value recomputed from its sources; each unreadable marker is one error line."""
    out = Outcome(text="")
    gone: dict[str, list] = {}                # a missing file: its first error and how often it is cited
    lines = text.split("\n")
    fenced = False
    for i, raw in enumerate(lines):
        where = f"{doc}:{i + 1}"
        if raw.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if fenced:
            continue                              # a marker in a code block is an example, not a claim
        examples: list[str] = []
        line = _hide_examples(raw, examples)
        if len(OPEN.findall(line)) != len(MARK.findall(line)) or line.count("<!--/m-->") != len(MARK.findall(line)):
            out.errors.append(f"{where}: a <!--m ...--> marker without its <!--/m--> on the same line (or the reverse); "
                              f"close it on the line it opens")
            continue

        def one(m: re.Match, line_no: int = i + 1, where: str = where) -> str:
            body, old = m.group("body"), m.group("value")
            if "--" in body or body.rstrip().endswith("-"):
                out.errors.append(f"{where}: the marker {body.strip()!r} holds '--' or ends with '-', which ends an HTML "
                                  f"comment early; write a - b with spaces and no double minus")
                return m.group(0)
            expr, spec = split_body(body)
            try:
                new = render(evaluate(expr, sources), spec)
            except MissingFile as exc:
                if exc.rel not in gone:
                    gone[exc.rel] = [len(out.errors), 0]
                    out.errors.append(f"{where}: {exc}")
                gone[exc.rel][1] += 1
                return m.group(0)
            except PipelineError as exc:
                out.errors.append(f"{where}: {exc} [marker {expr.strip()!r}]")
                return m.group(0)
            if "<!--" in new or "\n" in new:
                out.errors.append(f"{where}: the value of {expr.strip()!r} holds a newline or a comment; cite plain text")
                return m.group(0)
            if new != old:
                out.changes.append(Change(line_no, body.strip(), old, new))
            return f"<!--m {body.strip()}-->{new}<!--/m-->"

        lines[i] = _show_examples(MARK.sub(one, line), examples)
    for index, count in gone.values():
        if count > 1:
            out.errors[index] += f" (cited by {count} markers of {doc}; the first is here)"
    out.text = "\n".join(lines)
    return out


def _blank(m: re.Match) -> str:
    """A removed span keeps its newlines, so line numbers still point into the file."""
    return "\n" * m.group(0).count("\n")


def _check_block(m: re.Match, doc: str, text: str, root: Path) -> str | None:
    line = text.count("\n", 0, m.start()) + 1
    head = m.group("head").split()
    if m.group("kind") == "quoted":
        if len(head) != 1 or head[0] not in QUOTED_REASONS:
            return f"{doc}:{line}: <!--quoted {' '.join(head)}--> needs one reason of {', '.join(QUOTED_REASONS)}"
        return None
    if len(head) != 2 or not DATE.fullmatch(head[1]):
        return (f"{doc}:{line}: <!--measured {' '.join(head)}--> needs what measured it and the date: "
                f"<!--measured perf/x.py YYYY-MM-DD--> (or `manual` for a one-off run the text describes)")
    if head[0] != "manual" and not (root / head[0]).exists():
        return f"{doc}:{line}: <!--measured {head[0]} ...--> names no file of the repository; name the script or test that measured it"
    return None


def unmarked_numbers(text: str, doc: str, root: Path) -> list[str]:
    """One line per result number outside a marker, code, or a measured/quoted span (see the module doc)."""
    text = GENERATED.sub(_blank, FENCE.sub(_blank, text))
    text = CODE.sub(lambda m: _blank(m) if "<!--" in m.group(0) else m.group(0), text)   # markers shown as examples
    problems = [p for m in BLOCK.finditer(text) if (p := _check_block(m, doc, text, root))]
    for pattern in (BLOCK, MARK, COMMENT, CODE):
        text = pattern.sub(_blank, text)
    for stray in ("<!--", "-->"):
        if stray in text:
            line = text[: text.index(stray)].count("\n") + 1
            problems.append(f"{doc}:{line}: an unclosed HTML comment or marker; close it")
    text = LINK_TARGET.sub("]", text)
    text = LEVEL.sub(" ", VERSION.sub(" ", DATE.sub(" ", text)))
    for i, line in enumerate(text.split("\n")):
        for m in NUMBER.finditer(line):
            number = m.group(0)
            if any(c in number for c in ".,%\u00d7"):
                context = line[max(0, m.start() - 30): m.end() + 20].strip()
                problems.append(f"{doc}:{i + 1}: unmarked result number {number!r} in \"...{context}...\"; generate it "
                                f"with <!--m source:key %fmt-->...<!--/m-->, wrap it in <!--measured BY DATE--> or "
                                f"<!--quoted {'|'.join(QUOTED_REASONS)}-->, or drop it")
    return problems


def covered(doc: str) -> bool:
    """True for docs whose unmarked numbers the check reports."""
    return doc not in NOT_YET_CONVERTED and doc not in NOT_RESULTS


@dataclass
class Report:
    """What a pass over several docs found."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    unmarked: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        return [e for o in self.outcomes.values() for e in o.errors]

    def stale(self) -> list[str]:
        return [f"{doc}:{c.line}: reads {c.old!r}, its sources give {c.new!r} [{c.body}]; regenerate: "
                f"python -m decision_pipeline docs-numbers README.md docs/*.md"
                for doc, o in self.outcomes.items() for c in o.changes]


def scan(docs: list[str], root: Path) -> Report:
    """Regenerate every doc in memory (nothing written) and collect unmarked numbers of the covered ones."""
    sources = Sources(root)
    report = Report()
    for doc in docs:
        path = root / doc
        if not path.is_file():
            raise PipelineError(f"{doc}: no such doc")
        text = path.read_text(encoding="utf-8")
        report.outcomes[doc] = regenerate(text, doc, sources)
        if covered(doc):
            report.unmarked += unmarked_numbers(text, doc, root)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate the numbers in docs/ from metrics/ and params.yaml.")
    ap.add_argument("docs", nargs="+", help="markdown files, relative to --root")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a value is stale or a result number unmarked")
    ap.add_argument("--root", default=".", help="repository root (default: the working directory)")
    args = ap.parse_args(argv)
    root = Path(args.root)
    try:
        report = scan([str(Path(d)) for d in args.docs], root)
    except PipelineError as exc:
        print(exc, file=sys.stderr)
        return 2
    if report.errors:
        print("\n".join(report.errors), file=sys.stderr)
        return 2
    if args.check:
        problems = report.stale() + report.unmarked
        print("\n".join(problems) if problems else f"{len(report.outcomes)} docs agree with metrics/ and params.yaml",
              file=sys.stderr if problems else sys.stdout)
        return 1 if problems else 0
    for doc, outcome in report.outcomes.items():
        if outcome.changes:
            write_text_atomic(root / doc, outcome.text)
            for c in outcome.changes:
                print(f"{doc}:{c.line}: {c.old} -> {c.new} [{c.body}]")
    if report.unmarked:
        print("\n".join(report.unmarked), file=sys.stderr)
    return 0


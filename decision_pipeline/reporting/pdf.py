"""Lay out the report with reportlab platypus: a fixed page grammar the registry can count.

Why a fixed grammar: the tests check that the page count and the number of
embedded images follow from the registry, so the layout never depends on how
long a sentence happens to be. Page 1 is the title block and the main results;
page 2 the summary table (both shrunk to fit one page); each section starts a
page and fills half-page slots (its text, then one figure per slot); the
appendix pages a monospace listing at a fixed number of lines per page.
"""
from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from PIL import Image as PILImage
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.platypus import (BaseDocTemplate, Frame, Image, KeepInFrame, PageBreak, PageTemplate, Paragraph,
                                Preformatted, Spacer, Table, TableStyle)

from decision_pipeline.reporting.registry import SLOTS_PER_PAGE, Fig, Row, Section

MARGIN, BOTTOM = 48, 56
FRAME_W = A4[0] - 2 * MARGIN - 12             # frame padding 6 pt each side
FRAME_H = A4[1] - MARGIN - BOTTOM - 12
GAP = 10
SLOT_H = (FRAME_H - GAP) / SLOTS_PER_PAGE - 4
LINES_PER_PAGE = 80
LINE_CHARS = 118

_SS = getSampleStyleSheet()
STYLES = {
    "title": ParagraphStyle("t", parent=_SS["Title"], fontSize=20, leading=24, spaceAfter=6),
    "h1": ParagraphStyle("h1", parent=_SS["Heading1"], fontSize=14, leading=17, spaceAfter=4),
    "h2": ParagraphStyle("h2", parent=_SS["Heading2"], fontSize=11, leading=14, spaceAfter=2),
    "body": ParagraphStyle("b", parent=_SS["BodyText"], fontSize=9.5, leading=12.5, spaceAfter=4),
    "bullet": ParagraphStyle("bl", parent=_SS["BodyText"], fontSize=9.5, leading=12.5, leftIndent=12,
                             bulletIndent=2, spaceAfter=3),
    "small": ParagraphStyle("s", parent=_SS["BodyText"], fontSize=7.5, leading=9.2),
    "caption": ParagraphStyle("c", parent=_SS["BodyText"], fontSize=8, leading=10, textColor=colors.HexColor("#333333")),
    "mono": ParagraphStyle("m", fontName="Courier", fontSize=6.5, leading=8.2),
}


@dataclass(frozen=True)
class Meta:
    """What the title page says about the run."""
    revision: str
    params_digest: str
    profile: str
    date: str


@dataclass(frozen=True)
class Block:
    """A section as laid out: its text, rows and figures with the PNG each figure shows."""
    section: Section
    sentences: list[str]
    key_sentences: list[str]
    rows: list[Row]
    figures: list[tuple[Fig, Path]]


def p(text: str, style: str = "body") -> Paragraph:
    return Paragraph(escape(text), STYLES[style])


def wrap_lines(lines: list[str], width: int = LINE_CHARS) -> list[str]:
    """Hard-wrap long lines (continuations indented) so the appendix line count is known in advance."""
    out: list[str] = []
    for line in lines:
        line = line.rstrip().expandtabs(4)
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=True,
                                 drop_whitespace=False) or [""])
    return out


def appendix_pages(listings: list[tuple[str, list[str]]]) -> int:
    return sum(max(1, math.ceil(len(wrap_lines(lines)) / LINES_PER_PAGE)) for _, lines in listings)


def _one_page(flowables: list) -> list:
    return [KeepInFrame(FRAME_W, FRAME_H - 2, flowables, mode="shrink"), PageBreak()]


def _title_page(meta: Meta, blocks: list[Block], skipped: list[tuple[Section, str]]) -> list:
    info = Table([[p("run (dvc.lock digest)", "small"), p(meta.revision, "small")],
                  [p("params digest", "small"), p(meta.params_digest, "small")],
                  [p("profile", "small"), p(meta.profile, "small")],
                  [p("built (UTC)", "small"), p(meta.date, "small")]], colWidths=[90, FRAME_W - 90])
    info.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.3, colors.grey),
                              ("BACKGROUND", (0, 0), (0, -1), colors.HexColor("#eeeeee"))]))
    story = [p("Decision-model pipeline: run report", "title"), info, Spacer(1, 10), p("Main results", "h1")]
    for b in blocks:
        story.append(p(b.section.title, "h2"))
        story += [Paragraph(escape(s), STYLES["bullet"], bulletText="\u2022") for s in b.key_sentences]
    story.append(Spacer(1, 6))
    story.append(p("Every number is read from the tracked metrics and plot data (page 2 names the file and key of each "
                   "headline). A difference is called a difference only when its 95% CI excludes zero, the two 95% "
                   "CIs do not overlap, or it exceeds the recorded noise; otherwise the text says no difference was "
                   "detected.", "small"))
    if skipped:
        story.append(p("Sections skipped (their metrics are absent): " +
                       "; ".join(f"{s.title} ({why})" for s, why in skipped) + ".", "small"))
    return _one_page(story)


def _summary_page(blocks: list[Block]) -> list:
    head = [p(h, "small") for h in ("quantity", "value", "95% CI or noise floor", "metrics file:key")]
    data, style = [head], [("GRID", (0, 0), (-1, -1), 0.3, colors.grey),
                           ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dddddd")), ("VALIGN", (0, 0), (-1, -1), "TOP")]
    for b in blocks:
        if not b.rows:
            continue
        data.append([p(b.section.title, "small"), "", "", ""])
        style += [("SPAN", (0, len(data) - 1), (-1, len(data) - 1)),
                  ("BACKGROUND", (0, len(data) - 1), (-1, len(data) - 1), colors.HexColor("#f3f3f3"))]
        for r in b.rows:
            value = "n/a" if r.value is None else format(r.value, r.headline.spec)
            data.append([p(r.headline.label, "small"), p(value, "small"), p(r.bound_text(), "small"),
                         p(r.source, "small")])
    table = Table(data, colWidths=[140, 40, 105, FRAME_W - 285], repeatRows=1)
    table.setStyle(TableStyle(style))
    return _one_page([p("Summary of headline numbers", "h1"), table, Spacer(1, 6),
                      p("CI: 95% bootstrap interval recorded by the stage. noise: recorded half-range of repeated runs. "
                        "noise floor: the value a perfectly calibrated model reaches by chance on the same items (p95). "
                        "The same numbers are in metrics/summary.json.", "small")])


def _image(path: Path, max_h: float) -> Image:
    with PILImage.open(path) as img:
        w, h = img.size
    scale = min(FRAME_W / w, max_h / h)
    return Image(str(path), width=w * scale, height=h * scale)


def _section(number: int, b: Block) -> list:
    text = [p(f"{number}. {b.section.title}", "h1")] + [p(s) for s in b.sentences]
    slots = [KeepInFrame(FRAME_W, SLOT_H, text, mode="shrink")]
    for fig, path in b.figures:
        caption = p(f"Figure {number}.{len(slots)}: {fig.caption}", "caption")
        _, cap_h = caption.wrap(FRAME_W, SLOT_H)
        slots.append(KeepInFrame(FRAME_W, SLOT_H, [_image(path, SLOT_H - cap_h - 8), Spacer(1, 3), caption],
                                 mode="shrink"))
    story: list = []
    for i, slot in enumerate(slots):
        story.append(slot)
        last = i == len(slots) - 1
        story.append(PageBreak() if last or i % SLOTS_PER_PAGE == SLOTS_PER_PAGE - 1 else Spacer(1, GAP))
    return story


def _appendix(listings: list[tuple[str, list[str]]]) -> list:
    story: list = []
    for title, lines in listings:
        lines = wrap_lines(lines)
        pages = max(1, math.ceil(len(lines) / LINES_PER_PAGE))
        for k in range(pages):
            chunk = lines[k * LINES_PER_PAGE:(k + 1) * LINES_PER_PAGE]
            head = title + (f" ({k + 1}/{pages})" if pages > 1 else "")
            story += _one_page([p(head, "h2"), Preformatted("\n".join(chunk) or " ", STYLES["mono"])])
    return story


def render(meta: Meta, blocks: list[Block], skipped: list[tuple[Section, str]],
           listings: list[tuple[str, list[str]]]) -> bytes:
    """The whole PDF as bytes (nothing touches report/ until the caller writes them atomically)."""
    buf = io.BytesIO()

    def footer(canvas, doc) -> None:
        canvas.saveState()
        canvas.setFont("Helvetica", 7.5)
        canvas.setFillColor(colors.grey)
        canvas.drawString(MARGIN, BOTTOM / 2, f"Decision-model pipeline run report \u00b7 run {meta.revision.split(' ')[0]}")
        canvas.drawRightString(A4[0] - MARGIN, BOTTOM / 2, f"page {doc.page}")
        canvas.restoreState()

    doc = BaseDocTemplate(buf, pagesize=A4, leftMargin=MARGIN, rightMargin=MARGIN, topMargin=MARGIN,
                          bottomMargin=BOTTOM, title="Decision-model pipeline: run report",
                          author="decision-pipeline report stage", invariant=1)
    frame = Frame(MARGIN, BOTTOM, A4[0] - 2 * MARGIN, A4[1] - MARGIN - BOTTOM, id="main")
    doc.addPageTemplates([PageTemplate(id="page", frames=[frame], onPage=footer)])
    story = _title_page(meta, blocks, skipped) + _summary_page(blocks)
    for i, b in enumerate(blocks, 1):
        story += _section(i, b)
    story += _appendix(listings)
    while story and isinstance(story[-1], PageBreak):
        story.pop()                       # no blank page at the end
    doc.build(story)
    return buf.getvalue()

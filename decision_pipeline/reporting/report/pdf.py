"""Lay out the report with reportlab platypus: a fixed page grammar the registry can count.

Why a fixed grammar: the tests check that the page count and the number of
embedded images follow from the registry, so the layout never depends on how
long a sentence happens to be. Page 1 is the title block and the main results
(the claims' verdicts over the whole-chain runs first, where a study exists);
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

from decision_pipeline.reporting.report.claims import VERDICTS, num, study, to_detect
from decision_pipeline.reporting.report.registry import SLOTS_PER_PAGE, Fig, Row, Section

MARGIN, BOTTOM = 48, 56
FRAME_W = A4[0] - 2 * MARGIN - 12             # frame padding 6 pt each side
FRAME_H = A4[1] - MARGIN - BOTTOM - 12
GAP = 10
SLOT_H = (FRAME_H - GAP) / SLOTS_PER_PAGE - 4
LINES_PER_PAGE = 80
LINE_CHARS = 118
COLUMNS = 2                       # the params listing runs in two columns (its lines are short)
COL_CHARS = 58
STAGES_PER_PAGE = 40

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
    """What the title page says about the run: the code (content digest), the data (dvc.lock digest), the date.

    `date` is SOURCE_DATE_EPOCH or a pointer to the holding commit, never the clock, so one code
    tree and lock give one PDF (a forced rerun of a committed state leaves git clean).
    """
    revision: str                 # dvc.lock digest of the upstream stages' params and outputs
    params_digest: str
    profile: str
    date: str
    commit: str = "no pipeline code found"   # the code digest


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


def appendix_pages(listings: list[tuple[str, list[str]]], stages: int = 0) -> int:
    """Pages of the two-column params listing(s) plus the stage table (STAGES_PER_PAGE rows a page)."""
    per_page = LINES_PER_PAGE * COLUMNS
    return (sum(max(1, math.ceil(len(wrap_lines(lines, COL_CHARS)) / per_page)) for _, lines in listings)
            + (math.ceil(stages / STAGES_PER_PAGE) if stages else 0))


def _one_page(flowables: list) -> list:
    return [KeepInFrame(FRAME_W, FRAME_H - 2, flowables, mode="shrink"), PageBreak()]


def _info_table(meta: Meta) -> Table:
    rows = [("code (content digest)", meta.commit), ("run (dvc.lock digest)", meta.revision),
            ("params digest", meta.params_digest), ("profile", meta.profile), ("date (UTC)", meta.date)]
    info = Table([[p(k, "small"), p(v, "small")] for k, v in rows], colWidths=[95, FRAME_W - 95])
    info.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.3, colors.grey),
                              ("BACKGROUND", (0, 0), (0, -1), colors.HexColor("#eeeeee"))]))
    return info


def _title_page(meta: Meta, blocks: list[Block], skipped: list[tuple[Section, str]], noise_note: str,
                claims_note: str, claims: list | None = None) -> list:
    story = [p("Decision-model pipeline: run report", "title"), _info_table(meta), Spacer(1, 10),
             p("Main results", "h1")]
    if claims:
        story += [p(f"The research's comparisons over {max(c.n for c in claims)} whole-chain runs "
                    "(metrics/claims.json): the study is the headline, this run's value is one of its runs", "h2"),
                  verdict_table(claims), Spacer(1, 4)]
    for b in blocks:
        story.append(p(b.section.title, "h2"))
        story += [Paragraph(escape(s), STYLES["bullet"], bulletText="\u2022") for s in b.key_sentences]
    story.append(Spacer(1, 6))
    story.append(p("Every number is read from the tracked metrics and plot data (page 2 names the file and key of each "
                   "headline). A difference is called a difference only when its 95% CI excludes zero, the two 95% "
                   "CIs do not overlap, or it exceeds the recorded noise; otherwise the text says no difference was "
                   "detected. " + claims_note + " " + noise_note, "small"))
    if skipped:
        story.append(p("Sections skipped (their metrics are absent): " +
                       "; ".join(f"{s.title} ({why})" for s, why in skipped) + ".", "small"))
    return _one_page(story)


def judged(label: str, verdict: str) -> Paragraph:
    """'label: **verdict**' in one cell, so the text layer keeps a claim and its verdict together in any
    reading order (reporting/docs/verdicts.py reads the PDF's text)."""
    return Paragraph(f"{escape(label)}: <b>{escape(verdict)}</b>", STYLES["small"])


def verdict_table(claims: list) -> Table:
    """Page 1's claims, detected first: the verdict, the mean over the runs, the Holm-adjusted p, what a
    "not detected" would take, and this run's value (one of the runs)."""
    data = [[p(h, "small") for h in ("comparison: verdict over the whole-chain runs",
                                     "mean over the runs [95% t-interval]", "Holm p (raw)", "to detect: mde80 / runs",
                                     "this run")]]
    ordered = sorted(claims, key=lambda c: VERDICTS.index(c.verdict))
    for c in ordered:
        data.append([judged(c.label, c.verdict), p(study(c), "small"), p(f"{c.p_adjusted:.2g} ({c.p:.2g})", "small"),
                     p(to_detect(c), "small"), p(num(c.this_run), "small")])
    table = Table(data, colWidths=VERDICT_COLS, repeatRows=1)
    style = [("GRID", (0, 0), (-1, -1), 0.3, colors.grey), ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dddddd")),
             ("VALIGN", (0, 0), (-1, -1), "TOP"), ("TOPPADDING", (0, 0), (-1, -1), 1),
             ("BOTTOMPADDING", (0, 0), (-1, -1), 1)]
    style += [("BACKGROUND", (0, i), (0, i), colors.HexColor(TINT[c.verdict])) for i, c in enumerate(ordered, 1)]
    table.setStyle(TableStyle(style))
    return table


VERDICT_COLS = [180, 100, 56, FRAME_W - 380, 44]
TINT = {"detected": "#e3f2e1", "not detected": "#fbeaea", "not tested": "#f1f1f1"}


def _source(r: Row) -> Paragraph:
    """file on one line, :key on the next, so a long key never overflows its cell."""
    return Paragraph(escape(r.headline.file) + "<br/>:" + escape(r.key), STYLES["small"])


def _summary_page(blocks: list[Block]) -> list:
    head = [p(h, "small") for h in ("quantity (: verdict, where the claims file judges it)",
                                    "mean over the whole-chain runs [95% t-interval]", "this run [95% CI]",
                                    "run-to-run noise (source)", "metrics file:key")]
    data, style = [head], [("GRID", (0, 0), (-1, -1), 0.3, colors.grey),
                           ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dddddd")), ("VALIGN", (0, 0), (-1, -1), "TOP")]
    for b in blocks:
        if not b.rows:
            continue
        data.append([p(b.section.title, "small"), "", "", "", ""])
        style += [("SPAN", (0, len(data) - 1), (-1, len(data) - 1)),
                  ("BACKGROUND", (0, len(data) - 1), (-1, len(data) - 1), colors.HexColor("#f3f3f3"))]
        for r in b.rows:
            label = p(r.headline.label, "small") if r.claim is None else judged(r.headline.label, r.verdict_text())
            data.append([label, p(r.study_text(), "small"), p(r.this_run_text(), "small"), p(r.noise_text(), "small"),
                         _source(r)])
    table = Table(data, colWidths=SUMMARY_COLS, repeatRows=1)
    table.setStyle(TableStyle(style))
    return _one_page([p("Summary of headline numbers", "h1"), table, Spacer(1, 6),
                      p("The headline is the mean over the noise study's whole-chain runs (the committed run and its "
                        "reseeds) with its 95% t-interval; this run's value, one of those runs, is beside it with the "
                        "bootstrap interval the stage recorded over this run's items. Verdict: the claims file's, on "
                        "its Holm-adjusted p, where the number is one of its comparisons (page 3). Run-to-run noise: "
                        "the SD over whole-chain reseeds where the noise study measured it (metrics/noise/reseed.json), "
                        "else the within-run half-range, labelled so. Noise floor: the value a perfectly calibrated "
                        "model reaches by chance on the same items (p95). The same numbers are in "
                        "metrics/summary.json.", "small")])


SUMMARY_COLS = [120, 76, 82, 66, FRAME_W - 344]


def claims_page(claims: list, n_min: int | None) -> list:
    """The claims file as a table: verdict, n, mean [t-interval], raw and Holm p, noise, what detection needs."""
    head = [p(h, "small") for h in ("comparison: verdict", "n", "mean [95% t-interval]", "p raw / Holm",
                                    "SD over the runs", "mde80 family / runs to detect", "why")]
    data = [head]
    for c in claims:
        runs = str(c.n_to_detect) if c.n_to_detect is not None else "none" if c.verdict != "detected" else "\u2014"
        data.append([judged(c.label, c.verdict), p(str(c.n), "small"), p(study(c), "small"),
                     p(f"{c.p:.2g} / {c.p_adjusted:.2g}", "small"), p(num(c.noise, False), "small"),
                     p(f"{num(c.mde80_family, False)} / {runs}", "small"), p(c.reason, "small")])
    table = Table(data, colWidths=CLAIMS_COLS, repeatRows=1)
    style = [("GRID", (0, 0), (-1, -1), 0.3, colors.grey), ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dddddd")),
             ("VALIGN", (0, 0), (-1, -1), "TOP")]
    style += [("BACKGROUND", (0, i), (0, i), colors.HexColor(TINT[c.verdict])) for i, c in enumerate(claims, 1)]
    table.setStyle(TableStyle(style))
    m = claims[0].family_size if claims else 0
    rule = (f"A comparison is tested only with at least {n_min} paired runs; " if n_min else "") + \
        (f"detected means its 95% t-interval excludes zero, the mean exceeds its run-to-run SD, and its p, adjusted "
         f"by Holm's step-down rule over the {m} comparisons judged together, is below 0.05 (family-wise error 5%). "
         "mde80 family: the smallest mean this design detects with 80% power at the family's level (alpha / "
         f"{m}, or the SD where larger); runs to detect: how many whole-chain runs would detect the observed mean "
         "(none: no number of runs does, the mean is inside its SD).")
    return _one_page([p("Claims", "h1"), p("From metrics/claims.json. " + rule, "small"), Spacer(1, 4), table])


CLAIMS_COLS = [126, 18, 78, 48, 44, 52, FRAME_W - 366]


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


def _appendix(listings: list[tuple[str, list[str]]], stages: list[tuple[str, str]]) -> list:
    story: list = []
    per_page = LINES_PER_PAGE * COLUMNS
    for title, lines in listings:
        lines = wrap_lines(lines, COL_CHARS)
        pages = max(1, math.ceil(len(lines) / per_page))
        for k in range(pages):
            chunk = lines[k * per_page:(k + 1) * per_page]
            cols = [chunk[i * LINES_PER_PAGE:(i + 1) * LINES_PER_PAGE] for i in range(COLUMNS)]
            grid = Table([[Preformatted("\n".join(c) or " ", STYLES["mono"]) for c in cols]],
                         colWidths=[FRAME_W / COLUMNS] * COLUMNS)
            grid.setStyle(TableStyle([("VALIGN", (0, 0), (-1, -1), "TOP"), ("LEFTPADDING", (0, 0), (-1, -1), 0)]))
            head = title + (f" ({k + 1}/{pages})" if pages > 1 else "")
            story += _one_page([p(head, "h2"), grid])
    pages = math.ceil(len(stages) / STAGES_PER_PAGE)
    for k in range(pages):
        rows = [[p("stage", "small"), p("what it makes (dvc.yaml desc)", "small")]]
        rows += [[Paragraph(escape(n).replace("@", "@<br/>", 1) if "@" in n else escape(n), STYLES["small"]),
                  p(d, "small")] for n, d in stages[k * STAGES_PER_PAGE:(k + 1) * STAGES_PER_PAGE]]
        table = Table(rows, colWidths=STAGE_COLS, repeatRows=1)
        table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.3, colors.grey), ("VALIGN", (0, 0), (-1, -1), "TOP"),
                                   ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dddddd"))]))
        head = "Appendix B: stages (dvc.yaml)" + (f" ({k + 1}/{pages})" if pages > 1 else "")
        story += _one_page([p(head, "h2"), table])
    return story


STAGE_COLS = [150, FRAME_W - 150]


def table_overflows(table: Table, col_widths: list[float]) -> list[str]:
    """Cells whose text cannot fit its column (an unbreakable word wider than the cell): the cell would overflow."""
    out = []
    pad = 12                                   # reportlab's default cell padding, both sides
    for r, row in enumerate(table._cellvalues):
        for c, cell in enumerate(row):
            if isinstance(cell, Paragraph) and cell.minWidth() > col_widths[c] - pad:
                out.append(f"row {r} column {c}: '{cell.getPlainText()[:40]}' needs {cell.minWidth():.0f} pt, "
                           f"the column has {col_widths[c] - pad:.0f}")
    return out


def render(meta: Meta, blocks: list[Block], skipped: list[tuple[Section, str]],
           listings: list[tuple[str, list[str]]], stages: list[tuple[str, str]] | None = None,
           claims: list | None = None, n_min: int | None = None, noise_note: str = "") -> bytes:
    """The whole PDF as bytes (nothing touches report/ until the caller writes them atomically)."""
    buf = io.BytesIO()
    stages = stages or []

    def footer(canvas, doc) -> None:
        canvas.saveState()
        canvas.setFont("Helvetica", 7.5)
        canvas.setFillColor(colors.grey)
        code = meta.commit.split(" ")[0] if meta.commit.startswith("sha256:") else "none"
        canvas.drawString(MARGIN, BOTTOM / 2, f"Decision-model pipeline run report \u00b7 code {code} "
                                              f"\u00b7 run {meta.revision.split(' ')[0]}")
        canvas.drawRightString(A4[0] - MARGIN, BOTTOM / 2, f"page {doc.page}")
        canvas.restoreState()

    doc = BaseDocTemplate(buf, pagesize=A4, leftMargin=MARGIN, rightMargin=MARGIN, topMargin=MARGIN,
                          bottomMargin=BOTTOM, title="Decision-model pipeline: run report",
                          author="decision-pipeline report stage", invariant=1)
    frame = Frame(MARGIN, BOTTOM, A4[0] - 2 * MARGIN, A4[1] - MARGIN - BOTTOM, id="main")
    doc.addPageTemplates([PageTemplate(id="page", frames=[frame], onPage=footer)])
    claims_note = ("Comparisons judged in metrics/claims.json are stated by its verdict, on the p adjusted by Holm's "
                   "rule over the whole family (page 3)."
                   if claims else "No claims file (metrics/claims.json) yet: directions rest on this run's CIs.")
    story = _title_page(meta, blocks, skipped, noise_note, claims_note, claims) + _summary_page(blocks)
    if claims:
        story += claims_page(claims, n_min)
    for i, b in enumerate(blocks, 1):
        story += _section(i, b)
    story += _appendix(listings, stages)
    while story and isinstance(story[-1], PageBreak):
        story.pop()                       # no blank page at the end
    doc.build(story)
    return buf.getvalue()

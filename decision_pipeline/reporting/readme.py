"""The README's results table, generated from `metrics/summary.json` and the registry's labels and sources.

Why: a hand-typed results table drifts from the metrics; a test compares the
README block between the markers with this rendering, and
`python -m decision_pipeline.reporting.readme README.md` rewrites it after a run.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.reporting.registry import Headline
from decision_pipeline.reporting.sections import SECTIONS

BEGIN = "<!-- results-table:begin (generated from metrics/summary.json; python -m decision_pipeline.reporting.readme README.md) -->"
END = "<!-- results-table:end -->"


def _bound(h: Headline, summary: dict) -> str:
    n, s = h.name, h.spec
    if f"{n}_ci_low" in summary and f"{n}_ci_high" in summary:
        return f"95% CI [{format(summary[f'{n}_ci_low'], s)}, {format(summary[f'{n}_ci_high'], s)}]"
    if f"{n}_noise" in summary:
        return f"noise \u00b1{format(summary[f'{n}_noise'], s)}" + h.noise_note
    if f"{n}_noise_floor" in summary:
        return f"noise floor {format(summary[f'{n}_noise_floor'], s)}"
    return "no CI recorded"


def render_table(summary: dict) -> str:
    """Markdown rows for every headline present in summary.json, in registry order."""
    lines = ["| quantity | value | 95% CI or noise | metrics key |", "|---|---|---|---|"]
    for sec in SECTIONS:
        for h in sec.headlines:
            if h.name in summary:
                v = summary[h.name]
                value = "n/a" if v is None else format(v, h.spec)
                lines.append(f"| {h.label} | {value} | {_bound(h, summary)} | `{h.file}:{h.keys[0]}` |")
    return "\n".join(lines)


def readme_block(text: str) -> str:
    """The text between the markers (exclusive), stripped."""
    if BEGIN not in text or END not in text:
        raise PipelineError("README.md: results-table markers missing; add them around the results table")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def update(readme: Path, summary_path: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    readme_block(text)
    summary = json.loads(summary_path.read_text())
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    write_text_atomic(readme, f"{head}{BEGIN}\n{render_table(summary)}\n{END}{tail}")


if __name__ == "__main__":
    update(Path(sys.argv[1] if len(sys.argv) > 1 else "README.md"), Path("metrics/summary.json"))

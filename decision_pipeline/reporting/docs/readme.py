"""The README's results table, generated from `metrics/summary.json` and the registry's labels and sources.

Why: a hand-typed results table drifts from the metrics; a test compares the
README block between the markers with this rendering, and
`python -m decision_pipeline readme README.md` rewrites it after a run.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.reporting.report.noise import WITHIN_RUN
from decision_pipeline.reporting.report.noise import label as noise_label
from decision_pipeline.reporting.report.registry import Headline
from decision_pipeline.reporting.report.sections import SECTIONS

BEGIN = "<!-- results-table:begin (generated from metrics/summary.json; python -m decision_pipeline readme README.md) -->"
END = "<!-- results-table:end -->"


def _ci(h: Headline, summary: dict) -> str:
    """This run's 95% CI (or a chance floor) from summary.json; a dash where the stage records neither."""
    n, s = h.name, h.spec
    if f"{n}_ci_low" in summary and f"{n}_ci_high" in summary:
        return f"[{format(summary[f'{n}_ci_low'], s)}, {format(summary[f'{n}_ci_high'], s)}]"
    if f"{n}_noise_floor" in summary:
        return f"noise floor {format(summary[f'{n}_noise_floor'], s)} (p95, calibrated model)"
    return "\u2014"


def _noise(h: Headline, summary: dict) -> str:
    """Run-to-run noise with the source it was measured under (whole-chain reseeds or within one run)."""
    n = h.name
    if f"{n}_noise" not in summary:
        return "\u2014"
    source = summary.get(f"{n}_noise_source", WITHIN_RUN)
    return noise_label(summary[f"{n}_noise"], source, summary.get(f"{n}_noise_n"), h.spec, h.within)


def render_table(summary: dict) -> str:
    """Markdown rows for every headline present in summary.json, in registry order."""
    lines = ["| quantity | value | 95% CI (this run) | run-to-run noise (source) | metrics key |",
             "|---|---|---|---|---|"]
    for sec in SECTIONS:
        for h in sec.headlines:
            if h.name in summary:
                v = summary[h.name]
                value = "n/a" if v is None else format(v, h.spec)
                lines.append(f"| {h.label} | {value} | {_ci(h, summary)} | {_noise(h, summary)} | "
                             f"`{h.file}:{h.keys[0]}` |")
    lines += ["", "CI: the stage's bootstrap over this run's items. Noise: the SD over whole-chain reseeds "
              "(`metrics/noise/reseed.json`) where the noise study measured it, else the within-run half-range "
              "(it understates a rerun's spread); \u2014 where neither is recorded."]
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


def main(argv: list[str] | None = None) -> int:
    """`make docs`: README (the first argument, default README.md) from metrics/summary.json."""
    argv = sys.argv[1:] if argv is None else argv
    update(Path(argv[0] if argv else "README.md"), Path("metrics/summary.json"))
    return 0


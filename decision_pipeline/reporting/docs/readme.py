"""The README's results table, generated from `metrics/summary.json` and the registry's labels and sources,
and the claims' verdicts from `metrics/claims.json` (the headline is the noise study's mean, issue 50).

Why: a hand-typed results table drifts from the metrics; a test compares the
README block between the markers with this rendering, and
`python -m decision_pipeline readme README.md` rewrites it after a run.
"""
from __future__ import annotations

import sys
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import loads_json, write_text_atomic
from decision_pipeline.common.textfile import read_text
from decision_pipeline.reporting.report.claims import CLAIMS, VERDICTS, Claim, check_claims, num, statement, verdict_cell
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


def _study(h: Headline, summary: dict) -> str:
    """The headline: the mean over the noise study's whole-chain runs with its 95% t-interval."""
    n, s = h.name, h.spec
    if f"{n}_study_mean" not in summary:
        return "\u2014 (no noise study)"
    return (f"{format(summary[f'{n}_study_mean'], s)} [{format(summary[f'{n}_study_ci_low'], s)}, "
            f"{format(summary[f'{n}_study_ci_high'], s)}] ({summary[f'{n}_study_n']} runs)")


def _this_run(h: Headline, summary: dict) -> str:
    """This run's value with its own 95% CI or chance floor: one of the study's runs, labelled so."""
    v = summary[h.name]
    value = "n/a" if v is None else format(v, h.spec)
    bound = _ci(h, summary)
    return value if bound == "\u2014" else f"{value} {bound}"


def render_table(summary: dict, claims: list[Claim] | None = None) -> str:
    """Markdown rows for every headline present in summary.json, in registry order; then, when the claims
    file exists, each of its comparisons with the verdict sentence the report states (claims.statement)."""
    lines = ["| quantity | mean over the whole-chain runs [95% t-interval] | verdict (claims) | this run [95% CI] | "
             "run-to-run noise (source) | metrics key |", "|---|---|---|---|---|---|"]
    for sec in SECTIONS:
        for h in sec.headlines:
            if h.name in summary:
                verdict = summary.get(f"{h.name}_verdict")
                cell = "\u2014" if verdict is None else verdict_cell(verdict, summary.get(f"{h.name}_p_adjusted"))
                lines.append(f"| {h.label} | {_study(h, summary)} | {cell} | {_this_run(h, summary)} | "
                             f"{_noise(h, summary)} | `{h.file}:{h.keys[0]}` |")
    lines += ["", "Headline: the mean over the noise study's whole-chain runs (the committed run and its reseeds, "
              "`metrics/noise/reseed.json`) with its 95% t-interval. This run: the committed run's own value, one of "
              "those runs, with the stage's bootstrap CI over its items. Verdict: `metrics/claims.json`'s, on the "
              "Holm-adjusted p, where the number is one of its comparisons; \u2014 where it is not a judged "
              "comparison. Noise: the SD over the whole-chain reseeds where the noise study measured it, else the "
              "within-run half-range (it understates a rerun's spread); \u2014 where neither is recorded."]
    if claims:
        ordered = sorted(claims, key=lambda c: VERDICTS.index(c.verdict))
        lines += ["", f"The research's comparisons over {max(c.n for c in claims)} whole-chain runs "
                      f"(`metrics/claims.json`, Holm's correction over the {claims[0].family_size} judged together):",
                  "", "| comparison | verdict over the whole-chain runs | this run |", "|---|---|---|"]
        lines += [f"| {c.label} | {statement(c)} | {num(c.this_run)} |" for c in ordered]
    return "\n".join(lines)


def readme_block(text: str, where: str = "README.md") -> str:
    """The text between the markers (exclusive), stripped; each marker once, the end after the beginning."""
    for name, marker in (("begin", BEGIN), ("end", END)):
        if text.count(marker) != 1:
            found = "missing" if marker not in text else f"there {text.count(marker)} times"
            raise PipelineError(f"{where}: the results-table {name} marker is {found}; put exactly one `{marker}` "
                                "line around the results table (git diff shows what changed)")
    if text.index(END) < text.index(BEGIN):
        raise PipelineError(f"{where}: the results-table end marker comes before its begin marker; put the table "
                            "between them")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def claims_at(path: Path) -> list[Claim] | None:
    """The checked claims of `path` (None when there is no claims file yet)."""
    if not path.is_file():
        return None
    return check_claims(loads_json(read_text(path), str(path), "rerun the noise study's collect step"), str(path))[1]


def update(readme: Path, summary_path: Path, claims_path: Path = Path(CLAIMS)) -> None:
    text = read_text(readme)
    readme_block(text, str(readme))
    summary = loads_json(read_text(summary_path, missing="file not found; run the pipeline (`make run`) or `dvc "
                                   "pull` first"), str(summary_path), "rerun the summary stage (`dvc repro summary`)")
    if not isinstance(summary, dict):
        raise PipelineError(f"{summary_path}: holds {type(summary).__name__}, not a JSON object; rerun the summary "
                            "stage (`dvc repro summary`)")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    try:
        table = render_table(summary, claims_at(claims_path))
    except (TypeError, ValueError, OverflowError) as exc:  # a value of the wrong type (or size) for its format
        raise PipelineError(f"{summary_path}: a headline value cannot be written ({exc}); rerun the summary "
                            "stage (`dvc repro summary`)") from None
    write_text_atomic(readme, f"{head}{BEGIN}\n{table}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    """`make docs`: README (the first argument, default README.md) from metrics/summary.json."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        update(Path(argv[0] if argv else "README.md"), Path("metrics/summary.json"))
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


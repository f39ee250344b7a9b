"""Stage `report`: report/report.pdf, its figures (plots/report/) and metrics/summary.json.

Built in seconds from the tracked metrics and plot data only (no model is
loaded); the sections, their headline numbers and figures are the registry in
decision_pipeline/reporting/report/sections.py. Sections whose metrics are absent are
skipped; a missing key, a NaN, an empty plot data file or an unreadable image
stops the build with one line naming the file and key, and nothing is written.
"""
from __future__ import annotations

import time

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import read_params_file, stage_parser
from decision_pipeline.config import collect_errors
from decision_pipeline.reporting.report.build import build_report


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml", help="params file shown in the appendix and digested")
    ap.add_argument("--root", default=".", help="repository root holding metrics/ and plots/")
    ap.add_argument("--out", default="report/report.pdf")
    ap.add_argument("--summary", default="metrics/summary.json")
    ap.add_argument("--headline", default="metrics/headline.json",
                    help="the headline values alone: the one metrics file dvc.yaml declares (dvc exp show)")
    ap.add_argument("--figures", default="plots/report")
    args = ap.parse_args(argv)
    started = time.time()
    # the report prints the whole params file: every section must be one the pipeline knows, checked
    # by the loaders `make check` uses (the report tracks all of params.yaml, so it is the last guard)
    errors = collect_errors(read_params_file(args.params), args.params)
    if errors:
        more = f" (and {len(errors) - 1} more; `make check` lists them all)" if len(errors) > 1 else ""
        raise PipelineError(errors[0] + more)
    counts = build_report(args.root, args.out, args.summary, args.figures, args.params, args.headline)
    summary("report", started, **counts)


if __name__ == "__main__":
    raise SystemExit(main())

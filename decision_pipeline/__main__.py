"""`python -m decision_pipeline <verb> [args]`: the library's command-line tools behind one entry point.

Why one dispatcher: library modules are import-only (no `if __name__ == "__main__"` block), so a
module's location is free to change without breaking a Makefile line, a workflow or a doc; the verb is
the stable name. Each verb maps to one function taking the remaining arguments (`main(argv)`), imported
only when its verb runs, so `--help` lists them all without loading torch or any tool's dependencies.
The dvc.yaml stages are not here: they run as `python -m stages.<name>` (DESIGN.md section 3).

    python -m decision_pipeline --help             # every verb with one line
    python -m decision_pipeline <verb> --help      # the verb's own options
"""
from __future__ import annotations

import importlib
import sys

# verb -> (module, function taking argv, one line for --help); grouped by package, in Makefile order
VERBS: dict[str, tuple[str, str, str]] = {
    "config": ("decision_pipeline.config", "check_main",
               "check params.yaml through every section's loader (check), apply a checked profile (profile NAME), "
               "make run's profile step (run-profile NAME)"),
    "profiles": ("decision_pipeline.common.profiles", "main", "print a profile merged over params.yaml (show NAME)"),
    "codedeps": ("decision_pipeline.common.codedeps", "main",
                 "dvc.yaml deps each stage's imports miss (--suggest: a deps list per stage)"),
    "pull": ("decision_pipeline.common.pull", "main", "dvc pull, after checking the default remote answers (make pull)"),
    "s3-local": ("decision_pipeline.common.local_s3", "main",
                 "a local S3-compatible server for dvc push/pull (make s3-local)"),
    "gguf-import": ("decision_pipeline.lm.gguf_import", "main", "a GGUF checkpoint imported as a Hugging Face model directory"),
    "serve": ("decision_pipeline.lm.serve", "main", "an OpenAI-compatible completions server for a model directory"),
    "cohort": ("decision_pipeline.bench.cohort", "main", "a run's models exported into the S1MB Borda cohort (make cohort)"),
    "s1mb": ("decision_pipeline.bench.s1mb.cli", "main", "S1MB metrics of a judgments file, or the aggregate of a "
             "score table (metrics|aggregate FILE)"),
    "preflight": ("decision_pipeline.preflight.cli", "main", "a GPU profile's checks before any stage runs "
                  "(check|plan|hours|compare; make preflight, make memory-plan)"),
    "gpu-env": ("decision_pipeline.preflight.gpu_env", "main", "fail when the CPU torch stayed or vllm is not the pinned one "
                "(make gpu-install)"),
    "gpu-check": ("decision_pipeline.preflight.gpu_check", "main", "the real stages and the device smoke on a CUDA "
                  "machine, one table (make gpu-check)"),
    "smoke": ("decision_pipeline.preflight.smoke", "main", "the device smoke: the real trainers' steps at the "
              "profile's shapes beside the memory plan"),
    "stage-chain": ("decision_pipeline.preflight.stage_chain", "main", "the real stages on a random-weight model, "
                    "seconds and peak GPU memory each"),
    "decode-bench": ("decision_pipeline.preflight.decode_bench", "main", "hf decode ms per step, eager and compiled"),
    "review-ui": ("decision_pipeline.review_ui.cli", "main", "the human review web app and its accounts "
                  "(serve|export|sync|add-reviewer|remove-reviewer; make review-ui)"),
    "review": ("decision_pipeline.reporting.review.diff", "main", "params and metrics against a base revision, each "
               "change read against run-to-run noise (make review)"),
    "plots-diff": ("decision_pipeline.reporting.review.plots_diff", "main", "`dvc plots diff` as PNGs and one offline "
                   "HTML page"),
    "compare": ("decision_pipeline.reporting.review.compare", "main", "experiments' headline numbers beside the "
                "committed run's, marked against noise (make compare)"),
    "noise-study": ("decision_pipeline.reporting.review.noise_study", "main", "DVC experiments that each change one "
                    "source of chance, and their spread (make noise)"),
    "readme": ("decision_pipeline.reporting.docs.readme", "main", "the README's results table from "
               "metrics/summary.json (make docs)"),
    "docs-numbers": ("decision_pipeline.reporting.docs.numbers", "main", "the marked numbers in README.md and docs/ "
                     "rewritten from the metrics, or checked (--check; make docs)"),
    "verdicts": ("decision_pipeline.reporting.docs.verdicts", "main", "every verdict README.md, docs/ and the report "
                 "state checked against metrics/claims.json (make docs)"),
    "dag": ("decision_pipeline.reporting.docs.dag", "main", "docs/dag.png and docs/dag.json from dvc.yaml (make dag)"),
}
PROG = "python -m decision_pipeline"


def usage() -> str:
    width = max(map(len, VERBS))
    lines = [f"usage: {PROG} <verb> [args]   ({PROG} <verb> --help: the verb's options)", "", "verbs:"]
    lines += [f"  {verb:<{width}}  {line}" for verb, (_, _, line) in VERBS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the verb's function with the arguments after it; its return value is the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    verb, rest = argv[0], argv[1:]
    if verb not in VERBS:
        print(f"error: {PROG}: no verb {verb!r}; `{PROG} --help` lists them", file=sys.stderr)
        return 2
    module, function, _ = VERBS[verb]
    sys.argv = [f"{PROG} {verb}", *rest]      # argparse's prog, and what a tool reading sys.argv expected
    return getattr(importlib.import_module(module), function)(rest)


if __name__ == "__main__":
    raise SystemExit(main())

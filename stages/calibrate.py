"""Stage `calibrate@{model}`: per-task temperatures on the calibration split.

Also fits the learned router (`decision.evaluate.router`) on the same items and writes it
beside the temperatures (`router.json`). Fits one temperature per question type (choice / noul / score) by NLL, for the
fast readout and, separately, for the post-chain readout, keeping a fitted
temperature only where a likelihood-ratio test against T = 1 is significant
(`calibrate.alpha`); reports ECE and NLL before and after on the calibration
split, and a resplit study of the rule on the same items. Chains are sampled
with `evaluate.answering`, exactly as evaluation samples them. The yes/no offset
(`calibrate.yes_offset`) is fitted on the same items after the temperatures and written
beside them (`yes_offset.json`; evaluation applies it with `calibration.apply_yes_offset`);
the hypotheses H1–H4 are tested on these items by cross-fitting (`metrics ... hypotheses`).
"""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.common.io import write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.decision.evaluate.config import AnsweringParams, CalibrateParams, EvaluateParams
from decision_pipeline.lm.params import RuntimeParams
from decision_pipeline.questions.schema import load_split


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (CalibrateParams, "calibrate"), (AnsweringParams, "evaluate.answering"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--model", required=True, help="model directory")
    ap.add_argument("--items", required=True)
    ap.add_argument("--out", required=True, help="directory for temperatures.json")
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    # the model libraries (torch, transformers, peft) only after the arguments parsed: `--help` and a wrong
    # flag answer in under a second instead of paying ~5 s of imports
    import torch
    from decision_pipeline.decision.evaluate.answering import answer_questions
    from decision_pipeline.decision.evaluate.calibration import apply_yes_offset, calibrate_answers
    from decision_pipeline.decision.evaluate.evaluation import answer_records, records_to_table
    from decision_pipeline.decision.evaluate.router import fit_router
    started = time.time()
    p = load_section(CalibrateParams, "calibrate", args.params)
    answering = load_section(EvaluateParams, "evaluate", args.params).answering
    seed = load_base(args.params).seed
    torch.set_num_threads(answering.threads)
    questions = stable_subset(load_split(args.items, "calibration"), p.items, "calibrate")
    if len(questions) < p.folds:  # before any model is loaded
        raise PipelineError(f"{args.params}: calibrate.folds is {p.folds} but the calibration split gives "
                            f"{len(questions)} items; lower calibrate.folds or raise calibrate.items")
    runtime = load_section(RuntimeParams, "runtime", args.params)
    logits, chains = answer_questions(args.model, questions, answering, seed, runtime)
    temps, offsets, report = calibrate_answers(logits, chains, questions, p, seed)
    # the learned router (P(thinking fixes the readout)) is fit here, on the calibration split, and scored by
    # evaluate: on the probabilities evaluation computes, temperatures and yes/no offset applied
    post = apply_yes_offset([c["post_logits"] for c in chains], questions, temps["post_chain"], offsets["post_chain"])
    router = fit_router(records_to_table(answer_records(questions,
                                                        apply_yes_offset(logits, questions, temps["readout"],
                                                                         offsets["readout"]),
                                                        [{**c, "post_logits": lg} for c, lg in zip(chains, post)]),
                                         questions, temps), f"calibrate@{Path(args.model).name}")
    report["router"] = {k: router[k] for k in ("n_fit", "n_fixable", "converged")}
    write_json(f"{args.out}/router.json", router)
    write_json(f"{args.out}/temperatures.json", temps)
    write_json(f"{args.out}/yes_offset.json", offsets)
    write_json(args.metrics, report)
    r, h = report["readout"], report["hypotheses"]
    summary(f"calibrate@{Path(args.model).name}", started, n=len(questions), temps=r["temperatures"],
            ece_before=r["before"]["ece"], ece_after=r["after"]["ece"], yes_offset=offsets["readout"],
            **{k: h[k]["verdict"] for k in ("H1", "H2", "H3", "H4")})


if __name__ == "__main__":
    raise SystemExit(main())

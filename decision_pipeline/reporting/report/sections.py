"""The report's sections, one registry entry per stage group, in report order.

To add a section: write a narrative function (numbers in, sentences out, using
`narrative`'s CI-aware helpers), list its headline numbers and figures, and
append a `Section` to SECTIONS; add the files it reads to the `report` stage's
deps in dvc.yaml (a test checks that). A section whose `requires` files do not
exist is skipped, and a figure is listed only when the keys it draws are present,
so a profile that runs fewer stages still gets a complete report.
"""
from __future__ import annotations

from decision_pipeline.reporting.report import figures_analysis as A
from decision_pipeline.reporting.report import figures_charter as C
from decision_pipeline.reporting.report import narrative as N
from decision_pipeline.reporting.report.registry import Fig, Headline, Section
from decision_pipeline.reporting.report.sections_data import (BASE, CUR, FRND, INGEST, ITEMS, RND, curation_figs,
                                                       curation_text, data_figs, data_text)
from decision_pipeline.reporting.report.sections_model import (CROSS, CROSS_PNG, EV, _s1mb_headlines, chains_figs, chains_text,
                                                        cross_route_text, evaluation_figs, evaluation_text, rl_figs,
                                                        rl_text, s1mb_figs, s1mb_text)
from decision_pipeline.reporting.report.sources import MissingKey, Store


# ------------------------- optional: annotation-model selection (issue 11)
CHARTER_METRICS = ("metrics/charter/**/*.json",)
CHARTER_PLOTS = ("plots/charter/**/*.png", "plots/rank_generators/**/*.png", "plots/judge_agreement/**/*.png")


AGREEMENT, RANKING = "metrics/charter/judge_agreement.json", "metrics/charter/ranking.json"


def charter_text(s: Store) -> list[str]:
    """Guarded: reads judge_agreement's kappa/CI and the ranking's order only where present (issue 11 in progress)."""
    out = []
    if s.has(RANKING, "order") and isinstance(s.raw(RANKING, "order"), list):
        out.append("Generator ranking (quality first among the affordable): "
                   + " > ".join(map(str, s.raw(RANKING, "order"))) + ".")
    if all(s.has(AGREEMENT, k) for k in ("kappa", "ci_low", "ci_high")):
        k, lo, hi = (s.number(AGREEMENT, key, nullable=True) for key in ("kappa", "ci_low", "ci_high"))
        if k is not None and lo is not None and hi is not None:
            spread = s.number(AGREEMENT, "kappa_spread", nullable=True) if s.has(AGREEMENT, "kappa_spread") else None
            out.append(f"Judge vs simulated reviews (held-out validation split): Cohen's kappa {k:.2f} (95% CI [{lo:.2f}, {hi:.2f}])"
                       + (f", spread over repeated judge runs {spread:.2f}" if spread is not None else "") + ".")
    for c in A.improve_candidates(s):
        rel = A.IMPROVE.format(c)
        if s.raw(rel, "history"):
            out.append(f"Improver, {c}: {N.fmt(s.number(rel, 'revisions'), 'int')} revision(s), accept rate "
                       f"{s.number(rel, 'accept_rate_start'):.2f} -> {s.number(rel, 'accept_rate_final'):.2f} "
                       f"on {N.fmt(s.number(rel, 'n_docs'), 'int')} fresh documents (stopped: {s.raw(rel, 'stopped')})"
                       + ("" if s.raw(rel, "follows_prompt") else "; a rule reference ignores its prompt") + ".")
    files = [p for pat in CHARTER_METRICS for p in s.glob(pat)]
    return out + [f"Annotation-model selection metrics: {len(files)} files under metrics/charter/ (ranking, judge "
                  f"agreement, per-candidate improve/reflect/judge/throughput)."]


def _leads(s: Store, names: list[str], top: str) -> str:
    """Where `top` scores highest: 'leads on' only where no other candidate reaches it, 'ties for the top'
    (naming who with) where one does; the report's page check reads "leads on" against the drawn bars."""
    means = {c: {d: s.number(C.RANKING, f"rows.{c}.dimension_means.{d}")
                 for d in s.mapping(C.RANKING, f"rows.{c}.dimension_means")} for c in names}
    leads: list[str] = []
    ties: dict[tuple[str, ...], list[str]] = {}
    for d in sorted(means[top]):
        best = max(m.get(d, float("-inf")) for m in means.values())
        if means[top][d] == best:
            others = tuple(c for c in names if c != top and means[c].get(d) == best)
            (ties.setdefault(others, []) if others else leads).append(d.replace("_", " "))
    tied = "; ".join(f"{' and '.join(ds)} (with {', '.join(who)})" for who, ds in ties.items())
    parts = ([f"{top} leads on {', '.join(leads)}"] if leads else []) + \
            ([f"{'it' if leads else top} ties for the top on {tied}"] if ties else [])
    return "; ".join(parts) or f"{top} is highest on no dimension"


def _charter_captions(s: Store) -> dict[str, str]:
    names = C.candidates(s)
    acc = {c: s.number(C.RANKING, f"rows.{c}.accept_rate") for c in names}
    top = max(acc, key=acc.get)
    afford = [c for c in names if s.raw(C.RANKING, f"rows.{c}.affordable")]
    out = {"cost": f"{len(afford)} of {len(names)} candidates are affordable; {top} has the highest judge accept rate "
                   f"({acc[top]:.2f}). Rule references need no GPU; GPU-hours are extrapolated from measured throughput.",
           "dims": f"Rubric means per dimension (1-5) over the seed documents; {_leads(s, names, top)}. "
                   "One judge pass per repeat, deterministic rules here (spread 0).",
           "safety": "Accept rate by the documents' safety score: "
                     + "; ".join(f"{c} {min(v.values()):.2f}\u2013{max(v.values()):.2f}"
                                 for c in names for v in [s.mapping(C.RANKING, f"rows.{c}.accept_rate_by_safety")])
                     + ". A drop at high scores means the candidate fails on unsafe documents."}
    if s.has(C.AGREEMENT, "confusion"):
        k, lo, hi = (s.number(C.AGREEMENT, key, nullable=True) for key in ("kappa", "ci_low", "ci_high"))
        out["judge"] = ("The judge agrees with the (simulated) reviews on the held-out validation split"
                        + (f": kappa {k:.2f}, 95% CI [{lo:.2f}, {hi:.2f}]" if None not in (k, lo, hi) else "")
                        + "; off-diagonal cells are the disagreements.")
    return out


def charter_figs(s: Store) -> list[Fig]:
    """Redrawn from the charter metrics when the ranking holds rows; otherwise the charter stage's PNGs."""
    if C.has_charter_rows(s):
        try:
            cap = _charter_captions(s)
        except (MissingKey, KeyError, TypeError, ValueError):     # a caption never stops the report
            cap = {}
        figs = [Fig("charter_cost", cap.get("cost", "Cost vs quality per candidate."), C.cost_vs_quality),
                Fig("charter_dimensions", cap.get("dims", "Rubric score per dimension."), C.quality_by_dimension),
                Fig("charter_safety", cap.get("safety", "Accept rate by safety score."), C.robustness_by_safety)]
        if s.has(C.AGREEMENT, "confusion"):
            figs.append(Fig("charter_judge", cap.get("judge", "Judge vs reviews."), C.judge_confusion))
    else:
        figs = [Fig(f"charter_{i}", f"Annotation-model selection, drawn by its stage: {p}.", image=p)
                for i, p in enumerate(p for pat in CHARTER_PLOTS for p in s.glob(pat))]
    if A.improve_candidates(s):
        figs.append(Fig("charter_improver", "Improver loop per generator: judge accept rate per prompt revision "
                        "(fresh sample, frozen judge; each point's label is the failure its edit targets). "
                        "Deterministic references ignore their prompt, so their lines stay flat.",
                        A.improver_history))
    return figs


def _acc(model: str, label: str, measure: str, optional: bool = False) -> Headline:
    return Headline(f"{model}_{measure}", label, EV.format(model), f"cis.{measure}.point",
                    f"cis.{measure}.ci_low", f"cis.{measure}.ci_high", optional=optional)


SECTIONS: tuple[Section, ...] = (
    Section("data", "Data: questions, splits and the document pool", (ITEMS, INGEST), (ITEMS, INGEST),
            data_text, (), data_figs),
    Section("curation", "Curation and pretraining", ("metrics/curate/curated.json", "metrics/curate/random.json", CUR, FRND,
                                                    RND, BASE),
            ("metrics/curate/curated.json", "metrics/curate/filtered_random.json", "metrics/curate/random.json", CUR, FRND,
             RND, BASE, "plots/pretrain/curated_loss.json", "plots/pretrain/filtered_random_loss.json",
             "plots/pretrain/random_loss.json", A.ABLATION), curation_text,
            (Headline("curated_heldout_ppl", "held-out perplexity, curated selection (mean over seeds)", CUR,
                      "seeds.ppl_mean", noise="seeds.ppl_halfrange", spec=".2f", within="pretrain seeds",
                      within_n="seeds.n"),
             Headline("filtered_random_heldout_ppl", "held-out perplexity, filtered_random selection (mean over seeds)",
                      FRND, "seeds.ppl_mean", noise="seeds.ppl_halfrange", spec=".2f", within="pretrain seeds",
                      within_n="seeds.n"),
             Headline("random_heldout_ppl", "held-out perplexity, random selection (mean over seeds)", RND,
                      "seeds.ppl_mean", noise="seeds.ppl_halfrange", spec=".2f", within="pretrain seeds",
                      within_n="seeds.n"),
             Headline("base_gold_trace_nll", "base model gold-trace NLL (nats/token)", BASE, "gold_trace_nll", spec=".2f"),
             Headline("untrained_gold_trace_nll", "untrained model gold-trace NLL (nats/token)", BASE,
                      "gold_trace_nll_untrained", spec=".2f")),
            curation_figs, key_sentences=2),
    Section("chains_sft", "Decision model: generation, chain selection and SFT",
            ("metrics/generate.json", "metrics/select_chains.json", "metrics/choose_lr.json", "metrics/sft.json"),
            ("metrics/generate.json", "metrics/select_chains.json", "metrics/choose_lr.json", "metrics/sft.json",
             "metrics/lr_sweep/*.json", "plots/sft/loss_parts.json"), chains_text, (), chains_figs),
    Section("evaluation", "Decision model: calibration, evaluation and routing",
            (EV.format("base"), EV.format("sft"), "metrics/calibrate/*.json"),
            ("metrics/evaluate/*.json", "metrics/calibrate/*.json", "plots/evaluate/*/accuracy_by_group.json",
             "plots/evaluate/*/routing.json", "plots/evaluate/*/reliability.png", CROSS, CROSS_PNG),
            lambda s: evaluation_text(s) + cross_route_text(s),
            (_acc("base", "base readout accuracy", "readout_accuracy"),
             _acc("sft", "SFT readout accuracy", "readout_accuracy"),
             Headline("sft_minus_base_readout_accuracy", "SFT minus base readout accuracy (paired)", EV.format("sft"),
                      "vs_base.readout_accuracy.diff", "vs_base.readout_accuracy.ci_low", "vs_base.readout_accuracy.ci_high"),
             _acc("sft", "SFT thinking accuracy", "thinking_accuracy"),
             _acc("sft", "SFT post-chain readout accuracy", "post_chain_accuracy"),
             _acc("sft", "SFT accuracy, lowest-margin 30% routed to thinking", "routed_accuracy_at_0.3"),
             Headline("sft_ece_change", "SFT readout ECE change from calibration", EV.format("sft"), "ece_change.diff",
                      "ece_change.ci_low", "ece_change.ci_high"),
             Headline("sft_ece_calibrated", "SFT calibrated readout ECE", EV.format("sft"), "ece_calibrated",
                      floor="ece_noise_floor.p95"),
             Headline("base_ece_change", "base readout ECE change from calibration", EV.format("base"), "ece_change.diff",
                      "ece_change.ci_low", "ece_change.ci_high"),
             *(Headline(f"{m}_decision_score_{k}", f"{m} Decision Score: {k.replace('_', ' ')} vs label prior",
                        EV.format(m), f"decision_score.{k}_skill.point", f"decision_score.{k}_skill.ci_low",
                        f"decision_score.{k}_skill.ci_high", optional=True)
               for m in ("base", "sft") for k in ("brier", "rps")),
             *(Headline(f"sft_{k}_router_fixable_auroc", f"SFT {k} router: AUROC for 'thinking fixes the readout'",
                        EV.format("sft"), f"router.{k}.fixable_auroc", optional=True, nullable=True)
               for k in ("learned", "margin"))),
            evaluation_figs, key_sentences=4),
    Section("rl", "RL (GRPO)", ("metrics/rl.json",),
            ("metrics/rl.json", "metrics/evaluate/rl.json", "plots/rl/**/*.png", "plots/rl/**/*.json"),
            rl_text,
            (Headline("rl_reward_gain", "RL reward gain, last vs first quarter", "metrics/rl.json",
                      ("reward_gain.diff", "reward_gain.mean", "reward_gain.point"), "reward_gain.ci_low",
                      "reward_gain.ci_high", optional=True),
             Headline("rl_minus_sft_thinking_accuracy", "RL minus SFT thinking accuracy (paired)", EV.format("rl"),
                      "vs_sft.thinking_accuracy.diff", "vs_sft.thinking_accuracy.ci_low",
                      "vs_sft.thinking_accuracy.ci_high", optional=True),
             _acc("rl", "RL readout accuracy", "readout_accuracy", optional=True)),
            rl_figs, key_sentences=3),
    Section("s1mb", "S1MB scores", ("metrics/s1mb_data.json", "metrics/s1mb/*.json"),
            ("metrics/s1mb_data.json", "metrics/s1mb/*.json"), s1mb_text,
            _s1mb_headlines(),
            s1mb_figs),
    Section("charter", "Annotation-model selection", CHARTER_METRICS, CHARTER_METRICS + CHARTER_PLOTS,
            charter_text, (Headline("charter_judge_kappa", "judge vs simulated reviews (validation), Cohen's kappa", AGREEMENT, "kappa",
                                    "ci_low", "ci_high", spec=".2f", optional=True, nullable=True),),
            charter_figs, key_sentences=2),
)

"""The report's sections, one registry entry per stage group, in report order.

To add a section: write a narrative function (numbers in, sentences out, using
`narrative`'s CI-aware helpers), list its headline numbers and figures, and
append a `Section` to SECTIONS; add the files it reads to the `report` stage's
deps in dvc.yaml (a test checks that). A section whose `requires` files do not
exist is skipped, and a figure is listed only when the keys it draws are present,
so a profile that runs fewer stages still gets a complete report.
"""
from __future__ import annotations

from decision_pipeline.reporting import report_figures as F
from decision_pipeline.reporting import report_figures_analysis as A
from decision_pipeline.reporting import report_figures_decision as D
from decision_pipeline.reporting import narrative as N
from decision_pipeline.reporting.registry import Fig, Headline, Section
from decision_pipeline.reporting.sources import Store

ITEMS, INGEST = "metrics/items.json", "metrics/ingest.json"
CUR, FRND, RND = "metrics/pretrain/curated.json", "metrics/pretrain/filtered_random.json", "metrics/pretrain/random.json"
BASE = "metrics/base_model.json"
EV = "metrics/evaluate/{}.json"


# ------------------------------------------------------------------ data
def data_text(s: Store) -> list[str]:
    splits = s.mapping(ITEMS, "splits")
    fams = s.mapping(ITEMS, "families")
    regs = s.mapping(INGEST, "dev_registers")
    return [
        f"{N.fmt(s.number(ITEMS, 'n_items'), 'int')} decision questions from {len(fams)} procedural families, "
        f"split by SHA-256 of the question into " + ", ".join(f"{k} {N.fmt(s.number(ITEMS, f'splits.{k}'), 'int')}"
                                                           for k in splits) + ".",
        f"{N.fmt(s.number(ITEMS, 'cross_split_duplicates'), 'int')} questions appear in more than one split "
        f"({N.fmt(s.number(ITEMS, 'duplicate_questions'), 'int')} repeated question texts stay within one split).",
        f"Document pool: {N.fmt(s.number(INGEST, 'pool_docs'), 'int')} documents "
        f"({N.fmt(s.number(INGEST, 'pool_words'), 'int')} words) with safety scores 0\u20135; held-out dev target: "
        f"{N.fmt(s.number(INGEST, 'dev_docs'), 'int')} documents over {len(regs)} registers.",
    ]


def data_figs(s: Store) -> list[Fig]:
    return [Fig("data_items", "Questions per split and family (metrics/items.json) and pool documents per "
                "safety score (metrics/ingest.json).", F.items_and_pool)]


# -------------------------------------------------------------- curation
def _seed_arm(s: Store, rel: str) -> tuple[float, float, float]:
    return s.number(rel, "seeds.ppl_mean"), s.number(rel, "seeds.ppl_min"), s.number(rel, "seeds.ppl_max")


def curation_text(s: Store) -> list[str]:
    """Three arms over seeds, each gap judged against the seed ranges (whatever the direction)."""
    cur, frnd, rnd = _seed_arm(s, CUR), _seed_arm(s, FRND), _seed_arm(s, RND)
    n = N.fmt(s.number(CUR, "seeds.n"), "int")
    runs = f"{n} seeds (init and document order)"
    out = [f"Held-out perplexity (a held-out set disjoint from the classifier's dev target) over {runs}: curated "
           f"{cur[0]:.2f}, filtered_random {frnd[0]:.2f}, random {rnd[0]:.2f}.",
           N.vs_spread("What the register classifier adds (curated vs filtered_random)", cur, frnd,
                       lower_is="curated is lower", higher_is="curated is higher", runs=runs),
           N.vs_spread("What hygiene filters and MinHash add (filtered_random vs random)", frnd, rnd,
                       lower_is="filtered_random is lower", higher_is="filtered_random is higher", runs=runs)]
    cm = "metrics/curate/curated.json"
    out.append(f"Before either selection, {N.fmt(s.number(cm, 'decontamination.removed_docs'), 'int')} pool documents "
               f"containing one of {N.fmt(s.number(cm, 'decontamination.questions_found'), 'int')} held-out questions "
               f"were dropped; filters kept {N.fmt(s.number(cm, 'after_filters'), 'int')} of "
               f"{N.fmt(s.number(cm, 'pool_docs'), 'int')} documents and MinHash removed "
               f"{N.fmt(s.number(cm, 'dedup.removed'), 'int')} near-duplicates ({s.number(cm, 'dedup.rate'):.1%}).")
    out.append(N.point_only("Register classifier held-out accuracy", s.number(cm, "classifier.heldout_accuracy"),
                            s.number(cm, "classifier.chance"), "chance"))
    out.append(N.point_only("Gold-trace NLL of the decision model's base (nats/token)", s.number(BASE, "gold_trace_nll"),
                            s.number(BASE, "gold_trace_nll_untrained"), "an untrained model of the same shape", ".2f"))
    return out


def curation_figs(s: Store) -> list[Fig]:
    return [Fig("curation_ppl", "Held-out perplexity per register of the held-out set (seed-0 models). The error "
                "bars on 'all' span each arm's range over seeds; no per-register spread is recorded.",
                F.ppl_by_register),
            Fig("curation_loss", "Pretraining loss per step (plots/pretrain/*_loss.json).", F.pretrain_loss),
            Fig("curation_drops", "Documents dropped per reason; both selections share this filtering "
                "(metrics/curate/curated.json).", F.curation_funnel),
            Fig("curation_mix", "Share of selected tokens per register (metrics/curate/*.json: register_mix).",
                F.register_mix)] + ([Fig("curation_ablation", "The research's ablation as DVC experiments: curated "
                                         "held-out ppl per overfill and mode (metrics/curate_ablation.json).",
                                         A.curate_ablation)] if A.has_ablation(s) else [])


# ------------------------------------------------------- chains and SFT
def chains_text(s: Store) -> list[str]:
    g, sel, lr, sft = "metrics/generate.json", "metrics/select_chains.json", "metrics/choose_lr.json", "metrics/sft.json"
    kept_base = s.number(sel, "kept_by_source.base")
    out = [f"Selection kept {N.fmt(s.number(sel, 'kept'), 'int')} chains ({N.fmt(kept_base, 'int')} from the base model, "
           f"{N.fmt(s.number(sel, 'kept_by_source.teacher'), 'int')} from the teacher)"
           + ("; no chain of the base model survived, so SFT learns chains from the teacher only." if kept_base == 0
              else "."),
           f"{N.fmt(s.number(g, 'records'), 'int')} chains for {N.fmt(s.number(g, 'questions'), 'int')} pool questions: "
           f"{N.fmt(s.number(g, 'base.chains'), 'int')} from the base model "
           f"({N.fmt(s.number(g, 'base.truncated'), 'int')} truncated at the token cap) and "
           f"{N.fmt(s.number(g, 'teacher.chains'), 'int')} from the teacher ({s.raw(g, 'teacher.source')}).",
           f"Selection dropped {N.fmt(s.number(sel, 'loops_dropped'), 'int')} chains as loops; "
           f"{N.fmt(s.number(sel, 'unparsed'), 'int')} had no parsable answer."]
    nll = s.mapping(lr, "dev_nll")
    out.append(f"Learning rate {s.number(lr, 'chosen_lr'):g} chosen by the sweep rule ({s.raw(lr, 'rule')}); dev NLL "
               + ", ".join(f"{k}: {s.number(lr, f'dev_nll.{k}'):.3f}" for k in nll)
               + ". No noise floor is recorded for dev NLL, so the margin between rates is not claimed as a difference.")
    out.append(f"SFT: {N.fmt(s.number(sft, 'final.step'), 'int')} steps; final chain loss "
               f"{s.number(sft, 'final.chain_loss'):.3f}, readout loss {s.number(sft, 'final.readout_loss'):.3f} "
               f"(nats/token); dev readout accuracy {s.number(sft, 'dev.accuracy'):.3f} on "
               f"{N.fmt(s.number(sft, 'dev.n'), 'int')} items (point estimate; no CI recorded).")
    return out


def chains_figs(s: Store) -> list[Fig]:
    return [Fig("chains_selection", "Chains generated per source (metrics/generate.json) and what chain selection "
                "did with them (metrics/select_chains.json: drop_counts; 'ok' = a correct chain, a candidate to keep; "
                "'loop:cap' = unfinished at the token cap).", D.chain_selection),
            Fig("sft_curves", "Joint SFT loss per step with a moving mean (plots/sft/loss_parts.json), and the "
                "learning-rate sweep's dev NLL (metrics/lr_sweep/*.json) with the chosen rate.", D.sft_curves)]


# ------------------------------------------------- calibration/evaluation
def evaluation_text(s: Store) -> list[str]:
    """Comparisons to the base first, then per model (latest first): thinking, routing, calibration."""
    models = D.eval_models(s)
    later = [m for m in reversed(models) if m != "base"] + [m for m in models if m == "base"]
    out = [N.diff_ci(f"Readout accuracy of {m} vs base", s.number(EV.format(m), "vs_base.readout_accuracy.diff"),
                     s.number(EV.format(m), "vs_base.readout_accuracy.ci_low"),
                     s.number(EV.format(m), "vs_base.readout_accuracy.ci_high"))
           for m in later if s.has(EV.format(m), "vs_base.readout_accuracy")]
    for m in later:
        rel = EV.format(m)
        arm = lambda k: tuple(s.number(rel, f"cis.{k}.{p}") for p in ("point", "ci_low", "ci_high"))  # noqa: E731
        if s.number(rel, "thinking.parse_rate") > 0:
            out.append(f"{m}: " + N.arms_ci("thinking", arm("thinking_accuracy"), "readout", arm("readout_accuracy"))
                       + f" Parse rate {s.number(rel, 'thinking.parse_rate'):.2f}, loop rate {s.number(rel, 'loops.rate'):.2f}.")
        else:
            out.append(f"{m}: no thinking chain gave a parsable answer (parse rate 0; loop rate "
                       f"{s.number(rel, 'loops.rate'):.2f}), so thinking accuracy is 0.")
        gap = s.number(rel, "routing.gap_recovered_at_30", nullable=True)
        routed = N.arms_ci("accuracy with the lowest-margin 30% routed to thinking", arm("routed_accuracy_at_0.3"),
                           "readout only", arm("readout_accuracy"))
        out.append(f"{m}: {routed}" + (" There is no gap to recover: thinking is not better than the readout."
                                       if gap is None else f" Share of the readout-thinking gap recovered: {gap:.2f}."))
        out.append(f"{m}: " + N.diff_ci("Readout ECE after temperature scaling vs T = 1", s.number(rel, "ece_change.diff"),
                                        s.number(rel, "ece_change.ci_low"), s.number(rel, "ece_change.ci_high"))
                   + " " + N.below_floor("Calibrated ECE", s.number(rel, "ece_calibrated"),
                                         s.number(rel, "ece_noise_floor.p95"),
                                         floor_name="noise floor (p95 ECE of a perfectly calibrated model on these items)"))
    for m in D.models_in(s, "metrics/calibrate/{}.json"):
        rel = f"metrics/calibrate/{m}.json"
        temps = s.mapping(rel, "readout.temperatures")
        bounds = s.mapping(rel, "readout.at_bound")
        out.append(f"{m}: readout temperatures kept after the likelihood-ratio test: "
                   + (", ".join(f"{t} {s.number(rel, f'readout.temperatures.{t}'):.2f}"
                                + (" (at the search bound)" if t in bounds else "") for t in sorted(temps)) or "none") + ".")
    return out


def evaluation_figs(s: Store) -> list[Fig]:
    models = D.eval_models(s)
    figs = [Fig("eval_accuracy", "Eval accuracy per answering mode with 95% bootstrap CIs "
                "(metrics/evaluate/*.json: cis).", D.accuracy_cis),
            Fig("eval_grid", "Accuracy per family and difficulty level for each model, readout and thinking "
                "(plots/evaluate/*/accuracy_by_group.json).", D.accuracy_grid),
            Fig("eval_routing", "Routing: accuracy (left axis) and mean thinking tokens per item (right axis) as the "
                "lowest-margin share of items is answered by thinking (plots/evaluate/*/routing.json).", D.routing),
            Fig("eval_calibration", "Readout ECE before and after temperature scaling, with the noise floor "
                "(metrics/evaluate/*.json).", D.calibration)]
    figs += [Fig(f"eval_reliability_{m}", f"Reliability diagram of {m}'s readout before (T=1) and after calibration, "
                 f"drawn by evaluate@{m}.", image=f"plots/evaluate/{m}/reliability.png") for m in models]
    figs += [Fig("eval_chain_length", "Median thinking-chain length per task (metrics/evaluate/*.json: "
                 "by_task.median_chain_tokens); per-chain length distributions are not in the tracked plot data.",
                 D.chain_lengths),
             Fig("eval_unfinished", "Share of chains looping or unfinished at the token cap, and share with a "
                 "parsable answer, per task (metrics/evaluate/*.json: by_task).", D.unfinished)]
    if A.router_models(s):
        figs.append(Fig("eval_routers", "Learned router vs the fixed margin rule: AUROC for ranking the eval items "
                        "whose thinking fixes a wrong readout (metrics/evaluate/*.json: router).", A.router_auroc))
    if s.exists(CROSS_PNG):
        figs.append(Fig("eval_cross_routing", "Cross-model routing: one model's readout, another model's thinking "
                        "for its least confident items (drawn by cross_route; metrics/cross_route.json).",
                        image=CROSS_PNG))
    return figs


CROSS, CROSS_PNG = "metrics/cross_route.json", "plots/cross_route/routing.png"


def cross_route_text(s: Store) -> list[str]:
    """The best cross-model pair at the headline share against each readout model's own routing."""
    if not s.has(CROSS, "pairs"):
        return []
    pairs = s.mapping(CROSS, "pairs")
    out = []
    for reader in dict.fromkeys(p["readout_model"] for p in pairs.values()):
        own = pairs.get(f"{reader}->{reader}")
        others = [p for p in pairs.values() if p["readout_model"] == reader and p["thinking_model"] != reader]
        if not own or not others:
            continue
        best = max(others, key=lambda p: p["accuracy"]["point"])
        a, g = best["accuracy"], best["gain_over_readout"]
        out.append(f"Cross-model routing at {s.number(CROSS, 'share'):.0%}: {reader}'s readout with "
                   f"{best['thinking_model']}'s thinking {a['point']:.3f} (95% CI [{a['ci_low']:.3f}, {a['ci_high']:.3f}]; "
                   f"{g['diff']:+.3f} [{g['ci_low']:+.3f}, {g['ci_high']:+.3f}] over the readout alone) vs "
                   f"{own['accuracy']['point']:.3f} with its own thinking.")
    return out


# ------------------------------------------------------------------ S1MB
S1 = "metrics/s1mb/{}.json"


def s1mb_text(s: Store) -> list[str]:
    """Readout-only and routed Task Avg per model, both from the calibrated readout of one s1mb run."""
    models = D.models_in(s, S1)
    data = "metrics/s1mb_data.json"
    return ["S1MB Task Avg, calibrated readout only / lowest-margin share routed to thinking: " + ", ".join(
                f"{m} {s.number(S1.format(m), 'task_avg'):.3f} / {s.number(S1.format(m), 'task_avg_routed'):.3f} "
                f"({s.number(S1.format(m), 'route_fraction'):.0%} routed)" for m in models)
            + (" (95% item-bootstrap CIs in the summary table)." if all(s.has(S1.format(m), "cis.task_avg.ci_low")
                                                                         for m in models)
               else " (point estimates: no CI is recorded for S1MB scores, so no difference between models is claimed)."),
            f"S1MB category {s.raw(data, 'category')}: {N.fmt(s.number(data, 'n_benchmarks'), 'int')} benchmarks, "
            f"{N.fmt(s.number(data, 'n_judgments'), 'int')} judgments (source: {s.raw(data, 'source')})."]


def _s1mb_headlines() -> tuple[Headline, ...]:
    """Readout-only and routed Task Avg of base and SFT (the routed share is each file's route_fraction)."""
    return tuple(h for m, label in (("base", "base"), ("sft", "SFT")) for h in (
        # optional only so a metrics file from before the item bootstrap still reads (then without its CI)
        Headline(f"{m}_s1mb_task_avg", f"{label} S1MB Task Avg", S1.format(m), "task_avg",
                 "cis.task_avg.ci_low", "cis.task_avg.ci_high", optional=True, nullable=True),
        Headline(f"{m}_s1mb_task_avg_routed", f"{label} S1MB Task Avg, lowest-margin share routed to thinking",
                 S1.format(m), "task_avg_routed", "cis_routed.task_avg.ci_low", "cis_routed.task_avg.ci_high",
                 optional=True, nullable=True),
        Headline(f"{m}_s1mb_borda", f"{label} S1MB Borda points (cohort: reference scorers + s1mb.cohort_dir)",
                 S1.format(m), "borda", optional=True, nullable=True)))


# ------------------------------------------- optional: RL (issue 10)
def rl_text(s: Store) -> list[str]:
    """Guarded: reads only the keys issue 10 names, in the vs_base format ({diff|mean|point, ci_low, ci_high})."""
    out = []
    for file, key, what in (("metrics/rl.json", "reward_gain", "Mean reward, last vs first quarter of steps"),
                            ("metrics/evaluate/rl.json", "vs_sft.thinking_accuracy", "Thinking accuracy of RL vs SFT"),
                            ("metrics/evaluate/rl.json", "vs_sft.readout_accuracy", "Readout accuracy of RL vs SFT")):
        point = next((f"{key}.{k}" for k in ("diff", "mean", "point") if s.has(file, f"{key}.{k}")), None)
        if point and s.has(file, f"{key}.ci_low") and s.has(file, f"{key}.ci_high"):
            out.append(N.diff_ci(what, s.number(file, point), s.number(file, f"{key}.ci_low"),
                                 s.number(file, f"{key}.ci_high")))
    if s.has("metrics/rl.json", "difficulty_adjusted_reward.slope_per_round.point"):
        k = "difficulty_adjusted_reward.slope_per_round"
        out.append(N.diff_ci("Difficulty-adjusted reward (chain right minus the probe pass rate), slope per round",
                             s.number("metrics/rl.json", f"{k}.point"), s.number("metrics/rl.json", f"{k}.ci_low"),
                             s.number("metrics/rl.json", f"{k}.ci_high")))
    return out or ["RL metrics are present, but none of the keys this entry knows (reward_gain, vs_sft) was found."]


def rl_figs(s: Store) -> list[Fig]:
    """The RL stage's own figures; only when it drew none, one built from its per-round plot data."""
    drawn = [Fig(f"rl_{i}", f"RL: {p} (drawn by the RL stage from its rollout log: total reward and its parts, "
                 "share of chains open at the cap, completion length, groups with mixed right/wrong chains).",
                 image=p) for i, p in enumerate(s.glob("plots/rl/**/*.png"))]
    if drawn or not D.rl_series(s):
        figs = drawn
    else:
        figs = [Fig("rl_rounds", "RL per round from its plot data (reward, unfinished share, length columns of "
                    "plots/rl/*.json).", D.rl_rounds)]
    if A.has_rl_analyses(s):
        figs.append(Fig("rl_analyses", "RL analyses from metrics/rl.json: answer collapse per round, and the "
                        "difficulty-adjusted reward with its least-squares slope.", A.rl_analyses))
    return figs


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
    return out + [f"Annotation-model selection metrics: {', '.join(files)}."]


def charter_figs(s: Store) -> list[Fig]:
    figs = [Fig(f"charter_{i}", f"Annotation-model selection: {p}.", image=p)
            for i, p in enumerate(p for pat in CHARTER_PLOTS for p in s.glob(pat))]
    if A.improve_candidates(s):
        figs.append(Fig("charter_improver", "Improver loop per generator: judge accept rate per prompt revision "
                        "(metrics/charter/improve/*.json).", A.improver_history))
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
                      "seeds.ppl_mean", noise="seeds.ppl_halfrange", spec=".2f"),
             Headline("filtered_random_heldout_ppl", "held-out perplexity, filtered_random selection (mean over seeds)",
                      FRND, "seeds.ppl_mean", noise="seeds.ppl_halfrange", spec=".2f"),
             Headline("random_heldout_ppl", "held-out perplexity, random selection (mean over seeds)", RND,
                      "seeds.ppl_mean", noise="seeds.ppl_halfrange", spec=".2f"),
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
            rl_figs, key_sentences=2),
    Section("s1mb", "S1MB scores", ("metrics/s1mb_data.json", "metrics/s1mb/*.json"),
            ("metrics/s1mb_data.json", "metrics/s1mb/*.json"), s1mb_text,
            _s1mb_headlines(),
            lambda s: [Fig("s1mb_scores", "S1MB task scores and Task Avg per model (metrics/s1mb/*.json); no CIs "
                           "are recorded.", D.s1mb_scores)]),
    Section("charter", "Annotation-model selection", CHARTER_METRICS, CHARTER_METRICS + CHARTER_PLOTS,
            charter_text, (Headline("charter_judge_kappa", "judge vs simulated reviews (validation), Cohen's kappa", AGREEMENT, "kappa",
                                    "ci_low", "ci_high", spec=".2f", optional=True, nullable=True),),
            charter_figs, key_sentences=2),
)

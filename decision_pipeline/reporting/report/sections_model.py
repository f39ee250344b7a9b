"""Report entries for the decision model: chains and SFT, evaluation and routing, S1MB, RL.

Captions state the figure's conclusion with its noise; comparisons that the claims
file (`metrics/claims.json`) judged are phrased by its verdict, never as "higher"
when it does not call them detected. RL's entry states a failed gate and the
answer-collapse figures beside the reward gain whenever they occur.
"""
from __future__ import annotations

from decision_pipeline.reporting.report import narrative as N
from decision_pipeline.reporting.report import figures_analysis as A
from decision_pipeline.reporting.report import figures_decision as D
from decision_pipeline.reporting.report.claims import claim_for, guarded, statement, store_claims
from decision_pipeline.reporting.report.decomposition import thinking_split
from decision_pipeline.reporting.report.registry import Fig, Headline
from decision_pipeline.reporting.report.figures import task_name
from decision_pipeline.reporting.report.sections_data import caption
from decision_pipeline.reporting.report.sources import Store

EV = "metrics/evaluate/{}.json"
RL, RL_EVAL = "metrics/rl.json", "metrics/evaluate/rl.json"
COLLAPSE_CLAIM = "rl_top_answer_vs_gold_share"      # the claims file's collapse comparison (noise_study.CLAIMS)


def paired(s: Store, what: str, file: str, key: str, point: str = "diff") -> str:
    """A paired difference with its CI, phrased by the claims file's verdict when it judged this key."""
    d, lo, hi = (s.number(file, f"{key}.{k}") for k in (point, "ci_low", "ci_high"))
    return guarded(N.diff_ci(what, d, lo, hi), claim_for(store_claims(s), file, key), what, d, lo, hi)


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


# ------------------------------------------------- calibration/evaluation
def evaluation_text(s: Store) -> list[str]:
    """Comparisons to the base first, then per model (latest first): thinking, routing, calibration."""
    models = D.eval_models(s)
    later = [m for m in reversed(models) if m != "base"] + [m for m in models if m == "base"]
    out = [paired(s, f"Readout accuracy of {m} vs base", EV.format(m), "vs_base.readout_accuracy")
           for m in later if s.has(EV.format(m), "vs_base.readout_accuracy")]
    for m in later:
        if all(s.has(EV.format(m), f"vs_base.thinking_accuracy.{k}") for k in ("diff", "ci_low", "ci_high")):
            out.append(paired(s, f"Thinking accuracy of {m} vs base", EV.format(m), "vs_base.thinking_accuracy")
                       + " " + thinking_split(s, EV.format(m), "vs_base", EV.format("base")))
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
                   + (", ".join(f"{task_name(t)} {s.number(rel, f'readout.temperatures.{t}'):.2f}"
                                + (" (at the search bound)" if t in bounds else "") for t in sorted(temps)) or "none") + ".")
    return out


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




# ------------------------------------------------------------ figures
def chains_figs(s: Store) -> list[Fig]:
    g, sel = "metrics/generate.json", "metrics/select_chains.json"

    def chains() -> str:
        base, trunc = s.number(g, "base.chains"), s.number(g, "base.truncated")
        return (f"{N.fmt(s.number(sel, 'kept'), 'int')} chains kept ({N.fmt(s.number(sel, 'kept_by_source.base'), 'int')}"
                f" from the base model): {N.fmt(trunc, 'int')} of {N.fmt(base, 'int')} base-model chains ran to the "
                f"token cap ('loop:cap') and {N.fmt(s.number(sel, 'unparsed'), 'int')} chains had no parsable answer; "
                f"'ok' is a correct chain, a candidate to keep. Counts of one run.")

    def curves() -> str:
        lr = "metrics/choose_lr.json"
        nll = {k: s.number(lr, f"dev_nll.{k}") for k in s.mapping(lr, "dev_nll")}
        sft = "metrics/sft.json"
        return (f"SFT's chain loss ends at {s.number(sft, 'final.chain_loss'):.3f} and readout loss at "
                f"{s.number(sft, 'final.readout_loss'):.3f} nats/token after {N.fmt(s.number(sft, 'final.step'), 'int')} "
                f"steps (light lines: per step; dark: moving mean). The sweep chose lr {s.number(lr, 'chosen_lr'):g} "
                f"(dev NLL " + ", ".join(f"{k}: {v:.3f}" for k, v in nll.items())
                + "); no noise is recorded for dev NLL, so the margin is not a finding.")

    return [Fig("chains_selection", caption(chains, "Chains generated per source and chain selection's outcome."),
                D.chain_selection),
            Fig("sft_curves", caption(curves, "Joint SFT loss per step and the learning-rate sweep."), D.sft_curves)]


def _acc_caption(s: Store) -> str:
    models = D.eval_models(s)
    parts = []
    for m in models:
        rel = EV.format(m)
        if s.has(rel, "vs_base.readout_accuracy.diff"):
            d, lo, hi = (s.number(rel, f"vs_base.readout_accuracy.{k}") for k in ("diff", "ci_low", "ci_high"))
            c = claim_for(store_claims(s), rel, "vs_base.readout_accuracy")
            verdict = (c.verdict if c is not None else "within-run CI excludes zero; no claims verdict yet" if lo > 0 or hi < 0
                       else "CI includes zero")
            parts.append(f"{m} readout vs base {d:+.3f} [{lo:+.3f}, {hi:+.3f}] ({verdict})")
    below = [m for m in models if s.number(EV.format(m), "cis.thinking_accuracy.ci_high")
             < s.number(EV.format(m), "cis.readout_accuracy.ci_low")]
    return ("; ".join(parts) + (". " if parts else "") + (f"Thinking is below the readout for {', '.join(below)} "
            "(CIs do not overlap). " if below else "") + "Error bars: 95% item-bootstrap CIs within this run.")


def _grid_caption(s: Store) -> str:
    m = D.eval_models(s)[-1]
    rows = s.rows(f"plots/evaluate/{m}/accuracy_by_group.json", ("family", "level", "n"))
    fams: dict[str, list[float]] = {}
    for r in rows:
        if r.get("readout_accuracy") is not None:
            fams.setdefault(str(r["family"]), []).append(float(r["readout_accuracy"]))
    mean = {f: sum(v) / len(v) for f, v in fams.items()}
    hi, lo = max(mean, key=mean.get), min(mean, key=mean.get)
    n = sum(r["n"] for r in rows) / len(rows)
    return (f"{m}'s readout is most accurate on {hi} ({mean[hi]:.2f} averaged over levels) and least on {lo} "
            f"({mean[lo]:.2f}); each cell is one run's share of about {n:.0f} items (a 95% CI of roughly "
            f"\u00b1{1.96 * (0.25 / max(n, 1)) ** 0.5:.2f}), so single-cell differences are mostly noise.")


def _routing_caption(s: Store) -> str:
    parts = []
    for m in D.eval_models(s):
        rows = sorted(s.rows(f"plots/evaluate/{m}/routing.json", ("fraction", "accuracy")), key=lambda r: r["fraction"])
        best = max(rows, key=lambda r: r["accuracy"])
        parts.append(f"{m} {rows[0]['accuracy']:.3f} with the readout alone, best {best['accuracy']:.3f} at "
                     f"{best['fraction']:.0%} routed")
    return ("Routing the least confident items to thinking: " + "; ".join(parts)
            + " (point estimates of one run; the CIs at 30% are in the text).")


def _calib_caption(s: Store) -> str:
    parts = []
    for m in D.eval_models(s):
        rel = EV.format(m)
        b, a, f = (s.number(rel, k) for k in ("readout_uncalibrated.ece", "ece_calibrated", "ece_noise_floor.p95"))
        parts.append(f"{m} {b:.3f} \u2192 {a:.3f} ({'within' if a <= f else 'above'} its floor {f:.3f})")
    return ("Temperature scaling, ECE at T = 1 \u2192 calibrated: " + "; ".join(parts)
            + ". The floor is the p95 ECE a perfectly calibrated model shows on these items by chance.")


def _tasks_caption(s: Store, key: str, what: str, spec: str) -> str:
    models = D.eval_models(s)
    tasks = sorted(s.mapping(EV.format(models[0]), "by_task"))
    per = {m: [s.number(EV.format(m), f"by_task.{t}.{key}") for t in tasks] for m in models}
    return (f"{what} per task (" + ", ".join(task_name(t) for t in tasks) + "): "
            + "; ".join(f"{m} {min(v):{spec}}\u2013{max(v):{spec}}" for m, v in per.items())
            + ". One run, no CI; 'yes/no' is the task keyed noul in the metrics (does a word occur in a list?).")


def _router_caption(s: Store) -> str:
    parts = []
    for m in A.router_models(s):
        vals = [s.number(EV.format(m), f"router.{k}.fixable_auroc", nullable=True) for k, _ in A.ROUTERS]
        parts.append(f"{m} " + " vs ".join("undefined" if v is None else f"{v:.2f}" for v in vals))
    return ("AUROC of the learned router vs the fixed margin rule for finding the items whose thinking fixes a wrong "
            "readout: " + "; ".join(parts) + ". Undefined where a model has no fixable item; no CI is recorded, "
            "so no router is called better.")


def evaluation_figs(s: Store) -> list[Fig]:
    models = D.eval_models(s)
    figs = [Fig("eval_accuracy", caption(lambda: _acc_caption(s), "Eval accuracy per answering mode."),
                D.accuracy_cis),
            Fig("eval_grid", caption(lambda: _grid_caption(s), "Accuracy per family and difficulty level."),
                D.accuracy_grid),
            Fig("eval_routing", caption(lambda: _routing_caption(s), "Routing curve."), D.routing),
            Fig("eval_calibration", caption(lambda: _calib_caption(s), "Readout calibration."), D.calibration)]
    for m in models:
        rel = EV.format(m)
        figs.append(Fig(f"eval_reliability_{m}", caption(
            lambda rel=rel, m=m: f"Reliability of {m}'s readout before (T = 1) and after calibration: calibrated ECE "
                                 f"{s.number(rel, 'ece_calibrated'):.3f} against a noise floor of "
                                 f"{s.number(rel, 'ece_noise_floor.p95'):.3f} (drawn by evaluate@{m}).",
            f"Reliability diagram of {m}'s readout (drawn by evaluate@{m})."),
            image=f"plots/evaluate/{m}/reliability.png"))
    figs += [Fig("eval_chain_length", caption(lambda: _tasks_caption(s, "median_chain_tokens",
                                                                     "Median thinking-chain tokens", ".0f"),
                                              "Median thinking-chain length per task."), D.chain_lengths),
             Fig("eval_unfinished", caption(lambda: _tasks_caption(s, "loops.rate", "Share of chains looping or "
                                                                  "unfinished at the cap", ".2f"),
                                            "Unfinished and parsable chains per task."), D.unfinished)]
    if A.router_models(s):
        figs.append(Fig("eval_routers", caption(lambda: _router_caption(s), "Learned router vs margin rule."),
                        A.router_auroc))
    if s.exists(CROSS_PNG):
        text = cross_route_text(s)
        figs.append(Fig("eval_cross_routing", (text[0] if text else "Cross-model routing.")
                        + " (Drawn by cross_route.)", image=CROSS_PNG))
    return figs


def _s1mb_caption(s: Store) -> str:
    models = D.models_in(s, S1)
    parts = []
    for m in models:
        rel = S1.format(m)
        ci = (f" [{s.number(rel, 'cis.task_avg.ci_low'):.3f}, {s.number(rel, 'cis.task_avg.ci_high'):.3f}]"
              if s.has(rel, "cis.task_avg.ci_low") else "")
        parts.append(f"{m} {s.number(rel, 'task_avg'):.3f}{ci}")
    return ("S1MB Task Avg (baseline-adjusted; 0 is the baseline): " + ", ".join(parts)
            + ". Overlapping 95% item-bootstrap CIs are not a difference. 'yes/no' is the task keyed noul.")


def s1mb_figs(s: Store) -> list[Fig]:
    return [Fig("s1mb_scores", caption(lambda: _s1mb_caption(s), "S1MB task scores and Task Avg per model."),
                D.s1mb_scores)]


# ------------------------------------------------------------------ RL
def quarter_means(rows: list[dict], key: str) -> tuple[float | None, float | None]:
    """Mean of `key` over the first and the last quarter of rounds; a round without a value (no parsed
    answer) is left out, and a quarter without any gives None."""
    q = max(1, len(rows) // 4)

    def mean(part: list[dict]) -> float | None:
        values = [r[key] for r in part if r.get(key) is not None]
        return sum(values) / len(values) if values else None
    return mean(rows[:q]), mean(rows[-q:])


def collapse_sentence(s: Store) -> str | None:
    """Top-answer share vs the gold options' top share, first vs last quarter of rounds (None without the key)."""
    if not s.has(RL, "answer_collapse"):
        return None
    rows = sorted(s.raw(RL, "answer_collapse"), key=lambda r: r["round"])
    if len(rows) < 2:
        return None
    top0, top1 = quarter_means(rows, "top_answer_share")
    fair = all("top_answer_gold_share" in r for r in rows)  # runs before it carry only the gold top share
    gold0, gold1 = quarter_means(rows, "top_answer_gold_share" if fair else "top_gold_share")
    if None in (top0, top1, gold0, gold1):
        return "Answer collapse: some quarter of RL rounds has no parsed answer, so the shares are not compared."
    collapsing = top1 - top0 > 0.05 and top1 - gold1 > 0.1
    gold = ("that answer was the gold one for" if fair else "the gold options' top share was")
    text = (f"Answer collapse (first vs last quarter of RL rounds): the most common answer's share of parsed answers "
            f"went {top0:.2f} \u2192 {top1:.2f} while {gold} {gold0:.2f} \u2192 {gold1:.2f}"
            + ("; the policy increasingly gives one option regardless of the question, so part of any reward rise "
               "can be that option's base rate." if collapsing else "; no sign of one option taking over."))
    parsed0, parsed1 = quarter_means(rows, "parsed_share")
    right0, right1 = quarter_means(rows, "right_given_parsed")
    if None in (parsed0, parsed1, right0, right1):
        return text
    return text + (f" Rollouts with a parsed answer went {parsed0:.2f} \u2192 {parsed1:.2f}, and of those the right "
                   f"share {right0:.2f} \u2192 {right1:.2f}: a reward rise with a flat right share is the policy "
                   "answering more often, not better.")


def gate_sentence(s: Store) -> str | None:
    """The RL gate's verdict with the checks that failed (None when evaluate@rl recorded no gate)."""
    if not s.has(RL_EVAL, "rl_gate.passed"):
        return None
    gate = s.mapping(RL_EVAL, "rl_gate")
    failed = [k.replace("_", " ") for k, v in gate.items() if v is False and k != "passed"]
    failed = ["not met: " + ", ".join(failed)] if failed else []
    extra = f" (unfinished share {gate['unfinished_diff']:+.4f} vs SFT)" if isinstance(gate.get("unfinished_diff"),
                                                                                         (int, float)) else ""
    if gate["passed"]:
        return f"The RL gate passed (metrics/evaluate/rl.json: rl_gate, against {gate.get('baseline', 'SFT')})."
    return (f"The RL gate FAILED (metrics/evaluate/rl.json: rl_gate.passed = false, against "
            f"{gate.get('baseline', 'SFT')}): " + ", ".join(failed) + extra + "; the RL model is not an improvement.")


def rl_text(s: Store) -> list[str]:
    """Reward gain with the collapse figures beside it, then the gate, then the paired model comparisons."""
    out = []
    point = next((f"reward_gain.{k}" for k in ("diff", "mean", "point") if s.has(RL, f"reward_gain.{k}")), None)
    if point and s.has(RL, "reward_gain.ci_low") and s.has(RL, "reward_gain.ci_high"):
        out.append(paired(s, "Mean reward, last vs first quarter of steps", RL, "reward_gain", point.split(".")[-1]))
        collapse = collapse_sentence(s)
        if collapse:
            out[-1] += " " + collapse
        judged = next((c for c in store_claims(s) if c.name == COLLAPSE_CLAIM), None)
        if judged is not None:
            out[-1] += f" Across the whole-chain runs, {judged.label}: {statement(judged, full=False)}."
    gate = gate_sentence(s)
    if gate:
        out.append(gate)
    for key, what in (("vs_sft.thinking_accuracy", "Thinking accuracy of RL vs SFT"),
                      ("vs_sft.readout_accuracy", "Readout accuracy of RL vs SFT")):
        if all(s.has(RL_EVAL, f"{key}.{k}") for k in ("diff", "ci_low", "ci_high")):
            out.append(paired(s, what, RL_EVAL, key))
            if key.endswith("thinking_accuracy") and s.has(RL_EVAL, "thinking.parse_rate") \
                    and s.has(EV.format("sft"), "thinking.parse_rate"):
                out[-1] += " " + thinking_split(s, RL_EVAL, "vs_sft", EV.format("sft"))
    if s.has(RL, "difficulty_adjusted_reward.slope_per_round.point"):
        out.append(paired(s, "Difficulty-adjusted reward (chain right minus the probe pass rate), slope per round", RL,
                          "difficulty_adjusted_reward.slope_per_round", "point"))
    return out or ["RL metrics are present, but none of the keys this entry knows (reward_gain, vs_sft) was found."]


def rl_figs(s: Store) -> list[Fig]:
    """RL drawn by the report from its per-step plot data; the RL stage's own PNGs only when there is none."""
    if D.rl_series(s):
        gain = next((t for t in rl_text(s) if t.startswith("Mean reward")), "")
        figs = [Fig("rl_rounds", (gain.split(" Answer collapse")[0] or "GRPO per step.")
                    + " Curves: one run, per optimizer step.", D.rl_rounds)]
    else:
        figs = [Fig(f"rl_{i}", f"RL: {p} (drawn by the RL stage).", image=p)
                for i, p in enumerate(s.glob("plots/rl/**/*.png"))]
    if A.has_rl_analyses(s):
        figs.append(Fig("rl_analyses", caption(lambda: (collapse_sentence(s) or "Answer collapse per round.")
                                               + " Right: chain right minus the probe pass rate per round, with "
                                                 "its least-squares slope and 95% CI.",
                                               "RL analyses: answer collapse and difficulty-adjusted reward."),
                        A.rl_analyses))
    return figs

"""Report entries for the data and curation/pretraining sections: narrative and figures with captions.

Captions state the figure's conclusion with its noise (seed range, or the claims
file's verdict when it exists), not the file it was drawn from; the summary
table names each number's file and key.
"""
from __future__ import annotations

from collections.abc import Callable

from decision_pipeline.reporting.report import narrative as N
from decision_pipeline.reporting.report import figures as F
from decision_pipeline.reporting.report import figures_analysis as A
from decision_pipeline.reporting.report.claims import claim_for, statement, store_claims
from decision_pipeline.reporting.report.registry import Fig
from decision_pipeline.reporting.report.sources import MissingKey, Store

ITEMS, INGEST = "metrics/items.json", "metrics/ingest.json"
CUR, FRND, RND = "metrics/pretrain/curated.json", "metrics/pretrain/filtered_random.json", "metrics/pretrain/random.json"
BASE = "metrics/base_model.json"
CM = "metrics/curate/curated.json"
COMPARE = "metrics/pretrain/compare.json"


def caption(text: Callable[[], str], fallback: str) -> str:
    """A computed caption, or the plain one when a key it states is absent (the figure says what is missing)."""
    try:
        return text()
    except MissingKey:
        return fallback


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


def _data_caption(s: Store) -> str:
    fams = {k: s.number(ITEMS, f"families.{k}") for k in s.mapping(ITEMS, "families")}
    scores = {k: s.number(INGEST, f"safety_scores.{k}") for k in s.mapping(INGEST, "safety_scores")}
    low = sum(v for k, v in scores.items() if str(k) in ("0", "1")) / (sum(scores.values()) or 1)
    return (f"Families are near-balanced ({N.fmt(min(fams.values()), 'int')}\u2013{N.fmt(max(fams.values()), 'int')} "
            f"questions each); the document pool is skewed to benign text ({low:.0%} of documents score 0\u20131 on "
            f"safety). Counts, no sampling noise.")


def data_figs(s: Store) -> list[Fig]:
    return [Fig("data_items", caption(lambda: _data_caption(s), "Questions per split and family, and pool "
                                      "documents per safety score."), F.items_and_pool)]


# -------------------------------------------------------------- curation
def _seed_arm(s: Store, rel: str) -> tuple[float, float, float]:
    return s.number(rel, "seeds.ppl_mean"), s.number(rel, "seeds.ppl_min"), s.number(rel, "seeds.ppl_max")


def _arm_claim(s: Store, other: str):
    """The claims file's verdict on curated − `other` held-out ppl (compare.json's `vs_<other>.ppl`)."""
    return claim_for(store_claims(s), COMPARE, f"vs_{other}.ppl")


def curation_text(s: Store) -> list[str]:
    """Three arms over seeds, each gap judged against the seed ranges (or the claims file's verdict)."""
    cur, frnd, rnd = _seed_arm(s, CUR), _seed_arm(s, FRND), _seed_arm(s, RND)
    n = N.fmt(s.number(CUR, "seeds.n"), "int")
    runs = f"{n} seeds (init and document order)"
    out = [f"Held-out perplexity (a held-out set disjoint from the classifier's dev target) over {runs}: curated "
           f"{cur[0]:.2f}, filtered_random {frnd[0]:.2f}, random {rnd[0]:.2f}."]
    for what, a, b, other, lo, hi in (
            ("What the register classifier adds (curated vs filtered_random)", cur, frnd, "filtered_random",
             "curated is lower", "curated is higher"),
            ("What hygiene filters and MinHash add (filtered_random vs random)", frnd, rnd, None,
             "filtered_random is lower", "filtered_random is higher")):
        claim = _arm_claim(s, other) if other else None
        if claim is None:
            out.append(N.vs_spread(what, a, b, lower_is=lo, higher_is=hi, runs=runs))
            continue
        apart = a[2] < b[1] or a[1] > b[2]
        out.append(f"{what}: {statement(claim, full=False)}. Within this run over {runs}: {a[0]:.2f} [{a[1]:.2f}\u2013{a[2]:.2f}] "
                   f"vs {b[0]:.2f} [{b[1]:.2f}\u2013{b[2]:.2f}] (mean [range]; the seed ranges "
                   f"{'do not overlap' if apart else 'overlap'}).")
    out.append(f"Before any selection, {N.fmt(s.number(CM, 'decontamination.removed_docs'), 'int')} pool documents "
               f"containing one of {N.fmt(s.number(CM, 'decontamination.questions_found'), 'int')} held-out questions "
               f"were dropped (all three arms); for curated and filtered_random the filters kept "
               f"{N.fmt(s.number(CM, 'after_filters'), 'int')} of {N.fmt(s.number(CM, 'pool_docs'), 'int')} documents "
               f"and MinHash removed {N.fmt(s.number(CM, 'dedup.removed'), 'int')} near-duplicates "
               f"({s.number(CM, 'dedup.rate'):.1%}).")
    out.append(N.point_only("Register classifier held-out accuracy", s.number(CM, "classifier.heldout_accuracy"),
                            s.number(CM, "classifier.chance"), "chance"))
    out.append(N.point_only("Gold-trace NLL of the decision model's base (nats/token)", s.number(BASE, "gold_trace_nll"),
                            s.number(BASE, "gold_trace_nll_untrained"), "an untrained model of the same shape", ".2f"))
    return out


def _ppl_caption(s: Store) -> str:
    arms = {a: _seed_arm(s, f"metrics/pretrain/{a}.json") for a in F.ARMS}
    n = N.fmt(s.number(CUR, "seeds.n"), "int")
    best = min(arms, key=lambda a: arms[a][0])
    overlap = any(arms[best][2] >= arms[a][1] for a in arms if a != best)
    regs = sorted(s.mapping(CUR, "heldout.registers"))
    wins = sum(all(s.number(CUR, f"heldout.registers.{r}.ppl") <= s.number(f"metrics/pretrain/{a}.json",
                                                                         f"heldout.registers.{r}.ppl")
                   for a in F.ARMS) for r in regs)
    verdict = ("but the seed ranges overlap, so no difference is detected" if overlap
               else "and its seed range does not overlap the others'")
    return (f"{best} has the lowest mean held-out perplexity over {n} seeds ("
            + ", ".join(f"{a} {m:.2f} [{lo:.2f}\u2013{hi:.2f}]" for a, (m, lo, hi) in arms.items())
            + f"), {verdict}. Per register (seed-0 models only, no spread): curated is lowest on {wins} of "
              f"{len(regs)} registers.")


def _loss_caption(s: Store) -> str:
    tails = {}
    for a in F.ARMS:
        rows = s.rows(f"plots/pretrain/{a}_loss.json", ("step", "loss"))
        tail = rows[-max(1, len(rows) // 10):]
        tails[a] = sum(r["loss"] for r in tail) / len(tail)
    return ("Training loss on each arm's own data, one seed: last-10% means " + ", ".join(
        f"{a} {v:.2f}" for a, v in tails.items()) + ". Each arm is scored on different text, so this shows "
        "training ran, not which data is better (held-out perplexity above does that).")


def _drops_caption(s: Store) -> str:
    drops = s.mapping(CM, "drops")
    total = sum(s.number(CM, f"drops.{k}") for k in drops)
    big = max(drops, key=lambda k: s.number(CM, f"drops.{k}"))
    return (f"Hygiene filters drop {N.fmt(total, 'int')} of {N.fmt(s.number(CM, 'pool_docs'), 'int')} pool documents "
            f"(most: {big}) and MinHash {N.fmt(s.number(CM, 'dedup.removed'), 'int')} more; these apply to curated "
            f"and filtered_random, while held-out decontamination "
            f"({N.fmt(s.number(CM, 'decontamination.removed_docs'), 'int')} documents) applies to all three arms. "
            f"Deterministic counts.")


def _mix_caption(s: Store) -> str:
    parts = []
    for a in F.ARMS:
        rel = f"metrics/curate/{a}.json"
        if not s.has(rel, "register_mix"):
            continue
        mix = {g: s.number(rel, f"register_mix.{g}.tokens") for g in s.mapping(rel, "register_mix")}
        total = sum(mix.values()) or 1.0
        top = max(mix, key=mix.get)
        parts.append(f"{a}: largest {top} {mix[top] / total:.0%}, smallest {min(mix.values()) / total:.0%}")
    return "Register shares of the selected tokens (" + "; ".join(parts) + "). Curated balances registers by " \
        "design; the random arms follow the pool's mix."


def _ablation_caption(s: Store) -> str:
    rows = s.raw(A.ABLATION, "rows")
    best = min(rows, key=lambda r: r["ppl_mean"])
    beyond = [r for r in rows if r is not best and r["ppl_min"] > best["ppl_max"]]
    label = lambda r: f"{r['mode']} at overfill {r['overfill']:g}"  # noqa: E731
    where = s.raw(A.ABLATION, "read_on") if s.has(A.ABLATION, "read_on") else "held-out set"
    return (f"{label(best)} gives the lowest curated perplexity ({best['ppl_mean']:.2f}, {best['seeds']} seeds; "
            f"read on the {where.split(' (')[0]}); "
            + (", ".join(f"{label(r)} ({r['ppl_mean']:.2f})" for r in beyond)
               + (" lies" if len(beyond) == 1 else " lie") + " above its seed range" if beyond
               else "every other point's seed range overlaps it")
            + ". Bars: min\u2013max over seeds (DVC experiments, pretrain@curated).")


def curation_figs(s: Store) -> list[Fig]:
    figs = [Fig("curation_ppl", caption(lambda: _ppl_caption(s), "Held-out perplexity per arm and register."),
                F.ppl_by_register),
            Fig("curation_loss", caption(lambda: _loss_caption(s), "Pretraining loss per step."), F.pretrain_loss),
            Fig("curation_drops", caption(lambda: _drops_caption(s), "Documents dropped per reason."),
                F.curation_funnel),
            Fig("curation_mix", caption(lambda: _mix_caption(s), "Share of selected tokens per register."),
                F.register_mix)]
    if A.has_ablation(s):
        figs.append(Fig("curation_ablation", caption(lambda: _ablation_caption(s), "Curation ablation."),
                        A.curate_ablation))
    return figs


__all__ = ["data_text", "data_figs", "curation_text", "curation_figs", "caption", "claim_for"]

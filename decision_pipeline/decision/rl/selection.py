"""RL question selection: the questions that carry signal, screened, mixed and never reused.

A funnel of rules, each counting what it removed (a metrics diff shows which
rule moved), in this order:

1. `heldout_twin`  – shares its split key with a dev/eval/calibration question
   (the key treats shuffled options as the same question): training on it would leak;
2. `duplicate`     – a candidate with the same key came earlier (id order): one of
   twins only, so no question is trained on twice;
3. `fresh_seen`    – a fresh candidate whose key matches an SFT pool question:
   not fresh after all;
4. `too_few_correct` / `too_many_correct` – fewer than `min_correct` or more than
   `max_correct` of k probe chains right (default 1..k-1: with 0 or k of k every chain
   of the group gets the same advantage, no gradient);
5. `gold_prob_low` / `gold_prob_high` – the calibrated readout's gold
   probability outside [gold_prob_min, gold_prob_max]: the fast readout already
   knows (or is hopelessly wrong about) the answer;
6. `mix_ratio`     – surplus of one origin beyond `fresh_fraction`.

The kept questions are interleaved so that every prefix keeps the mix
(the `rl` stage takes a prefix: as many as its rounds need).
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from decision_pipeline.common import stats
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_random
from decision_pipeline.decision.rl.config import RlSelectParams
from decision_pipeline.questions.schema import gold_index, normalised_key

RULES = ("heldout_twin", "duplicate", "fresh_seen", "too_few_correct", "too_many_correct", "gold_prob_low",
         "gold_prob_high", "mix_ratio")
_FIX = {"heldout_twin": "the candidates are twins of held-out questions; check items.splits",
        "duplicate": "the candidates are all twins of each other; probe more questions (rl_probe.*_questions)",
        "fresh_seen": "every fresh question is a twin of an SFT question; probe more (rl_probe.fresh_questions)",
        "too_few_correct": "the SFT model rarely answers them right; lower rl_select.min_correct, raise rl_probe.k "
                           "or use easier questions",
        "too_many_correct": "the SFT model nearly always answers them right; raise rl_select.max_correct or "
                            "rl_probe.k, or use harder questions",
        "gold_prob_low": "lower rl_select.gold_prob_min",
        "gold_prob_high": "raise rl_select.gold_prob_max",
        "mix_ratio": "set rl_select.fresh_fraction between 0 and 1 so both origins can contribute"}


def gold_probability(row: dict, q: dict, temps: dict[str, float]) -> float:
    """The readout's probability of the gold option at the question type's calibrated temperature."""
    probs = stats.softmax_with_temperature(np.asarray(row["readout_logits"], dtype=float), temps.get(q["task"], 1.0))
    return float(probs[gold_index(q)])


def mix(fresh: list[dict], sft: list[dict], fraction: float) -> tuple[list[dict], int]:
    """The largest interleaved set with `fraction` fresh questions; returns (kept, surplus dropped).

    Interleaving by running share (ties to fresh) keeps the ratio in every prefix.
    """
    if fraction >= 1.0:
        n_fresh, n_sft = len(fresh), 0
    elif fraction <= 0.0:
        n_fresh, n_sft = 0, len(sft)
    else:
        total = min(len(fresh) / fraction, len(sft) / (1 - fraction))
        n_fresh, n_sft = min(len(fresh), int(round(total * fraction))), min(len(sft), int(round(total * (1 - fraction))))
    kept, f, s = [], fresh[:n_fresh], sft[:n_sft]
    while f or s:
        take_fresh = bool(f) and (not s or sum(x["origin"] == "fresh" for x in kept) <= fraction * len(kept))
        kept.append(f.pop(0) if take_fresh else s.pop(0))
    return kept, len(fresh) + len(sft) - len(kept)


def select_questions(rows: Sequence[dict], questions_by_id: dict[str, dict], pool: Sequence[dict],
                     heldout: Sequence[dict], temps: dict[str, float], p: RlSelectParams,
                     seed: int) -> tuple[list[dict], dict]:
    """Apply the funnel to probe rows; returns (kept questions in training order, metrics)."""
    heldout_keys = {normalised_key(q) for q in heldout}
    pool_keys = {normalised_key(q) for q in pool}
    dropped = Counter()
    seen_keys: set[str] = set()
    last_reason = "heldout_twin"
    if rows and p.max_correct >= rows[0]["k"]:
        raise PipelineError(f"params.yaml: rl_select.max_correct ({p.max_correct}) must be below rl_probe.k "
                            f"({rows[0]['k']}): a group whose chains are all right carries no signal")
    survivors: dict[str, list[dict]] = {"fresh": [], "sft": []}
    for row in sorted(rows, key=lambda r: r["id"]):
        q = questions_by_id[row["id"]]
        key = normalised_key(q)
        gold_p = gold_probability(row, q, temps)
        reason = None
        if key in heldout_keys:
            reason = "heldout_twin"
        elif key in seen_keys:
            reason = "duplicate"
        elif row["origin"] == "fresh" and key in pool_keys:
            reason = "fresh_seen"
        elif row["correct"] < p.min_correct:
            reason = "too_few_correct"
        elif row["correct"] > p.max_correct:
            reason = "too_many_correct"
        elif gold_p < p.gold_prob_min:
            reason = "gold_prob_low"
        elif gold_p > p.gold_prob_max:
            reason = "gold_prob_high"
        seen_keys.add(key)
        if reason:
            dropped[reason] += 1
            last_reason = reason
            continue
        survivors[row["origin"]].append({"id": q["id"], "origin": row["origin"], "correct": row["correct"],
                                         "k": row["k"], "gold_prob": round(gold_p, 6), "family": q["family"],
                                         "level": q["level"], "task": q["task"]})
    for origin, items in survivors.items():  # seeded order within an origin; ids break no ties (unique)
        make_random(seed, "rl_select", origin).shuffle(items)
    kept, surplus = mix(survivors["fresh"], survivors["sft"], p.fresh_fraction)
    if surplus:
        dropped["mix_ratio"] += surplus
        last_reason = "mix_ratio"
    if not kept:
        if not rows:
            raise PipelineError("rl_select: the probe holds no questions; set rl_probe.fresh_questions or "
                                "rl_probe.sft_questions above 0")
        counts = ", ".join(f"{r} {dropped[r]}" for r in RULES if dropped[r])
        raise PipelineError(f"rl_select: no eligible questions: rule '{last_reason}' removed the last of "
                            f"{len(rows)} candidates ({counts}); {_FIX[last_reason]}")
    metrics = {"candidates": len(rows), "kept": len(kept),
               "kept_by_origin": dict(sorted(Counter(q["origin"] for q in kept).items())),
               "kept_by_family": dict(sorted(Counter(q["family"] for q in kept).items())),
               "kept_correct_of_k": dict(sorted(Counter(str(q["correct"]) for q in kept).items())),
               "dropped": {r: dropped.get(r, 0) for r in RULES},
               "kept_gold_prob_mean": round(float(np.mean([q["gold_prob"] for q in kept])), 6),
               "fresh_fraction": round(sum(q["origin"] == "fresh" for q in kept) / len(kept), 6)}
    return kept, metrics

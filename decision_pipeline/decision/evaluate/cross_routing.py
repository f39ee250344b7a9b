"""Cross-model routing: the fast readout of one model, the thinking answer of another.

Why: the lab notebook routed the least confident readouts of a cheap model to a
different model's thinking (e.g. SFT readout -> RL thinking, base readout -> SFT
thinking) and read the accuracy/cost curve. The routing rule is evaluate's (the
lowest-margin share f of items, margin from the readout model's calibrated
probabilities, round-half-up(f * n) items, ties by item order); only the thinking
columns come from the other model, aligned by question id on the same eval items.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from decision_pipeline.common import stats
from decision_pipeline.decision.evaluate import metrics as dm

HEADLINE_SHARE = 0.3   # evaluate's headline routed share (metrics.headline_cis, gap_recovered)
THINKING_COLUMNS = ("thinking_pred", "thinking_correct", "parsed", "chain_tokens", "unfinished")


def cross_table(readout: dm.Table, thinking: dm.Table) -> dm.Table:
    """`readout`'s table with the thinking columns of `thinking` (same ids, else ValueError)."""
    idx = dm._align(readout, thinking)
    return {**readout, **{c: thinking[c][idx] for c in THINKING_COLUMNS}}


def pair_summary(readout: dm.Table, thinking: dm.Table, share: float, n_resamples: int, seed: int) -> dict[str, Any]:
    """Accuracy at routed share `share` with its item-bootstrap CI, the paired gain over the readout
    model alone, mean thinking tokens per item, and the whole curve."""
    t = cross_table(readout, thinking)
    correct, routed = dm._routed_correct(t, share)
    point, lo, hi = stats.bootstrap_ci(correct.astype(float), n_resamples=n_resamples, seed=seed)
    d, dlo, dhi = stats.paired_bootstrap_diff(correct.astype(float), t["readout_correct"].astype(float),
                                              n_resamples=n_resamples, seed=seed)
    return {"n": int(t["gold"].size), "share": share, "n_routed": int(routed.sum()),
            "accuracy": {"point": dm._r(point), "ci_low": dm._r(lo), "ci_high": dm._r(hi)},
            "gain_over_readout": {"diff": dm._r(d), "ci_low": dm._r(dlo), "ci_high": dm._r(dhi)},
            "mean_thinking_tokens": dm._r(t["chain_tokens"][routed].sum() / t["gold"].size),
            "readout_accuracy": dm._r(np.mean(t["readout_correct"])),
            "thinking_accuracy": dm._r(np.mean(t["thinking_correct"])),
            "curve": dm.routing_curve(t)}


def all_pairs(tables: dict[str, dm.Table], share: float, n_resamples: int, seed: int) -> dict[str, dict]:
    """Every ordered (readout model, thinking model) pair, the same-model ones included as the
    reference, keyed 'A->B' in the models' given order."""
    return {f"{a}->{b}": {"readout_model": a, "thinking_model": b,
                          **pair_summary(tables[a], tables[b], share, n_resamples, seed)}
            for a in tables for b in tables}

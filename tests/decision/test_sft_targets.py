"""SFT readout targets by `sft.target_mode` (#35.7): the research's vote mix as the default, gold-only and
one-hot gold as the ablation's named modes; hand-computed."""
from __future__ import annotations

from pathlib import Path

import pytest

from decision_pipeline.common.params import from_dict
from decision_pipeline.common.profiles import merged_profile
from decision_pipeline.decision.sft.config import TARGET_MODES, SFTParams
from decision_pipeline.decision.sft.data import build_joint_examples, readout_target

ROOT = Path(__file__).resolve().parents[2]
SOFT = {"options": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "gold": "b", "target": {"a": 0.2, "b": 0.7, "c": 0.1}}
HARD = {"options": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "gold": "b"}


def test_each_mode_by_hand():
    # votes 0, 0 (both for a), alpha 0.5: vote_mix = 0.5 * [0.2, 0.7, 0.1] + 0.5 * [1, 0, 0]
    assert readout_target(SOFT, [0, 0], 0.5, "vote_mix") == pytest.approx([0.6, 0.35, 0.05])
    assert readout_target(SOFT, [0, 0], 0.5, "gold_only") == pytest.approx([0.2, 0.7, 0.1])
    assert readout_target(SOFT, [0, 0], 0.5, "gold_onehot") == [0.0, 1.0, 0.0]
    # a hard item, votes a, a, b and one unparsed: vote share [2/3, 1/3, 0] mixed 0.5 with [0, 1, 0]
    assert readout_target(HARD, [0, 0, 1, None], 0.5, "vote_mix") == pytest.approx([1 / 3, 2 / 3, 0.0])
    assert readout_target(HARD, [0, 0, 1, None], 0.5, "gold_only") == [0.0, 1.0, 0.0]
    assert readout_target(HARD, [0, 0, 1, None], 0.5, "gold_onehot") == [0.0, 1.0, 0.0]
    # no parsed vote: every mode is the gold (vote_mix and gold_only keep a soft item soft)
    assert readout_target(SOFT, [None], 0.5, "vote_mix") == readout_target(SOFT, [None], 0.5, "gold_only")
    assert readout_target(SOFT, [], 0.5) == pytest.approx([0.2, 0.7, 0.1])  # the default is vote_mix
    with pytest.raises(ValueError, match="not one of vote_mix, gold_only, gold_onehot"):
        readout_target(HARD, [], 0.5, "gold-only")


def _full(qid: str, q: dict) -> dict:
    return {**q, "id": qid, "family": "f", "level": 0, "task": "choice", "question": f"{qid}?", "trace": "",
            "options": [{**o, "text": o["id"], "value": None} for o in q["options"]]}


def test_examples_count_the_targets_each_mode_trains_on(tiny):
    _, tok = tiny
    qs = [_full("hard", HARD), _full("soft", SOFT)]
    votes = {"hard": [0, None]}  # one parsed (wrong) model vote on the hard item
    counts = {}
    for mode in TARGET_MODES:
        examples, _ = build_joint_examples(tok, qs, [], votes, 0.5, 1.0, 512, target_mode=mode)
        readouts = [ex for ex in examples if ex["kind"] == "readout"]
        counts[mode] = [(ex["voted"], ex["target_soft"]) for ex in readouts]
    # vote_mix: the vote makes the hard item's target [0.5, 0.5, 0] soft; the soft item stays soft
    assert counts["vote_mix"] == [(True, True), (False, True)]
    assert counts["gold_only"] == [(False, False), (False, True)]
    assert counts["gold_onehot"] == [(False, False), (False, False)]


@pytest.mark.parametrize("profile", ["default", "micro", "gpu"])
def test_every_profile_trains_on_the_research_rule(profile):
    p = from_dict(SFTParams, merged_profile(profile, ROOT)["sft"], f"{profile} profile: sft")
    assert p.target_mode == "vote_mix"

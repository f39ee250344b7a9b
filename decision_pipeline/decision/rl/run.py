"""The `rl` stage's run around the GRPO trainer: which questions train, and what the run reports.

Why a module (beside sft/run.py): the stage entry point did this itself — checked the selection,
counted origins, built the metrics — so the rules were only testable by running the stage. Here
they are functions of data: the selection check, the gold-position balancing, and the metrics with
the research's analyses (reward trend adjusted for difficulty by the probe's pass rate, answer
collapse per round and over the last quarter).

Why balance gold positions: yes/no questions always list yes first and count questions their values
in increasing order, so where the gold sits follows the answer, and rl_select keeps the questions the
SFT model gets partly right, which can favour golds at the letter it prefers; fewer options also
put more golds at A. A policy that always answers one letter then earns reward without reading the
question (issue 35: top-answer share 0.60 -> 0.78 over training against a top gold share near 0.53).
With golds spread evenly over the positions of every option count, one letter is right exactly as
often as chance within each option count. TRL's GRPO group
shares its prompt, so the order is fixed per question (not per rollout); the gold id, the option
values and the target (keyed by option id) travel with the options, so the letters shown, the
parser and the rewards all read the new order.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.rl.analyses import (answer_collapse, collapse_last_quarter, difficulty_adjusted_trend,
                                                    probe_baseline)
from decision_pipeline.decision.rl.metrics import round_rows, run_summary
from decision_pipeline.decision.rl.config import RLParams
from decision_pipeline.questions.schema import gold_index

ORIGINS = ("fresh", "sft")


#: whole rounds a shortened run must keep: its reward gain and collapse compare the first and last quarters
MIN_ROUNDS = 8


def fit_rounds(p: RLParams, n_selected: int, where: str) -> RLParams:
    """The params the run trains with: `rl` itself when the selection fills its rounds, else as many whole
    rounds as the selected questions fill (each question still used once, `max_steps` lowered to match).

    Why: how many questions rl_select keeps depends on the SFT model's probe, so a reseed or a data change
    can keep fewer than `max_steps` needs; that run trains a shorter run (its metrics' `rounds` says how
    many) instead of failing a whole-chain rerun. Fewer than MIN_ROUNDS rounds is one line.
    Example: 540 selected, 16 prompts per round, 36 rounds planned -> 33 rounds (max_steps 66 at 2 steps
    per round)."""
    rounds = min(p.rounds, n_selected // p.prompts_per_round)
    if rounds == p.rounds:
        return p
    if rounds < MIN_ROUNDS:
        raise PipelineError(f"{where}: {n_selected} questions selected fill {rounds} rounds of {p.prompts_per_round} "
                            f"prompts (each question is used once), fewer than the {MIN_ROUNDS} a run needs; lower "
                            "rl.prompts_per_round, or probe more (rl_probe.*_questions)")
    return replace(p, max_steps=rounds * p.steps_per_generation)


def training_questions(selected: Sequence[Mapping], items_by_id: Mapping[str, dict], p: RLParams,
                       where: str) -> list[dict]:
    """The first `p.prompts_needed` selected questions (each used in one round), or one clear line."""
    if len(selected) < p.prompts_needed:
        raise PipelineError(f"{where}: {len(selected)} questions selected, but {p.rounds} rounds x "
                            f"{p.prompts_per_round} prompts need {p.prompts_needed} (each question is used once); "
                            "lower rl.max_steps or rl.prompts_per_round, or probe more (rl_probe.*_questions)")
    missing = [s["id"] for s in selected[: p.prompts_needed] if s["id"] not in items_by_id]
    if missing:
        raise PipelineError(f"{where}: question {missing[0]!r} is not in the items file; rerun rl_select")
    return [items_by_id[s["id"]] for s in selected[: p.prompts_needed]]


def balance_gold_positions(questions: Sequence[dict]) -> list[dict]:
    """The questions, each with its options re-permuted: the i-th question (in training order) with n
    options gets its gold at position i mod n, so within every option count each position holds the
    gold floor(m/n) or ceil(m/n) times of m; the other options keep their relative order.

    Example: golds at positions 0, 0, 1 of three 2-option questions become 0, 1, 0; a 4-option
    count question [0, 1, 2, 3] with gold 2, first of its count, becomes [2, 0, 1, 3].
    """
    seen: Counter = Counter()
    out = []
    for q in questions:
        n = len(q["options"])
        slot = seen[n] % n
        seen[n] += 1
        gold = q["options"][gold_index(q)]
        rest = [o for o in q["options"] if o is not gold]
        out.append({**q, "options": rest[:slot] + [gold] + rest[slot:]})
    return out


def arrange_gold_positions(questions: Sequence[dict], mode: str) -> list[dict]:
    """`rl.gold_positions`: balanced (`balance_gold_positions`) or as_selected (the items' own order)."""
    if mode == "balanced":
        return balance_gold_positions(questions)
    if mode == "as_selected":
        return list(questions)
    raise PipelineError(f"params.yaml: rl.gold_positions {mode!r} is not one of balanced, as_selected")


def gold_positions(questions: Sequence[Mapping]) -> dict:
    """Golds per position for each option count, and the share of the most common gold position overall
    (what a policy that always answers one letter would get right)."""
    by_count: dict[int, list[int]] = {}
    for q in questions:
        n = len(q["options"])
        by_count.setdefault(n, [0] * n)[gold_index(dict(q))] += 1
    overall = Counter(gold_index(dict(q)) for q in questions)
    return {"by_option_count": {str(n): c for n, c in sorted(by_count.items())},
            "top_share": round(overall.most_common(1)[0][1] / len(questions), 6) if questions else None}


def run_metrics(rollouts: Sequence[Mapping], history: Sequence[Mapping], p: RLParams, seed: int,
                selected: Sequence[Mapping], questions: Sequence[Mapping],
                probe_rows: Sequence[Mapping], as_selected: Sequence[Mapping]) -> tuple[dict, list[dict]]:
    """(metrics/rl.json, the per-round rows): reward gain, origins, difficulty-adjusted trend, collapse.

    `questions` are the trained ones (options as arranged by `rl.gold_positions`), `as_selected` the
    same questions in the items' own option order: the gold positions of both are recorded."""
    rounds = round_rows(rollouts, history, p.steps_per_generation)
    metrics = run_summary(rollouts, history, rounds, p.max_steps, 1000, seed)
    origins = {s["id"]: s["origin"] for s in selected}
    metrics.update(steps=p.max_steps,
                   prompts_by_origin={o: sum(origins[q["id"]] == o for q in questions) for o in ORIGINS})
    if probe_rows:
        k = int(probe_rows[0]["k"])
        metrics["difficulty_adjusted_reward"] = difficulty_adjusted_trend(rollouts, probe_baseline(probe_rows, k),
                                                                          1000, seed)
    metrics["answer_collapse"] = answer_collapse(rollouts)
    metrics["answer_collapse_last"] = collapse_last_quarter(metrics["answer_collapse"])
    metrics["gold_positions"] = {"mode": p.gold_positions, "as_selected": gold_positions(as_selected),
                                 "trained": gold_positions(questions)}
    return metrics, rounds

"""Seeds reorder the selection's budget part only: the reserve tail never swaps in (issue 23, item 5)."""
from __future__ import annotations

from decision_pipeline.lm.training import seed_order


def test_seed_order_keeps_the_document_set_and_the_tail():
    for k in (1, 2, 3):
        order = seed_order(10, 7, seed=5, k=k)
        assert sorted(order[:7]) == list(range(7)) and order[7:] == [7, 8, 9]
    assert seed_order(10, 7, 5, 1) != seed_order(10, 7, 5, 2)      # the order does vary across seeds
    assert seed_order(10, 7, 5, 1) == seed_order(10, 7, 5, 1)
    assert sorted(seed_order(10, None, 5, 1)) == list(range(10))   # old selections: shuffle everything
    assert seed_order(4, 9, 5, 1)[:4] != [] and sorted(seed_order(4, 9, 5, 1)) == [0, 1, 2, 3]


def test_equal_weight_ppl_hand_computed():
    import math

    from decision_pipeline.lm.training import equal_weight_ppl
    # losses 1 and 3 nats: equal weight -> exp(2), whatever the token counts (token-weighted would differ)
    regs = {"news": {"loss": 1.0, "tokens": 900}, "reasoning": {"loss": 3.0, "tokens": 100}}
    assert equal_weight_ppl(regs) == round(math.exp(2.0), 4)

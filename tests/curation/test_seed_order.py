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


def _params(**kw):
    from tests.micro import tiny_pretrain_params
    return tiny_pretrain_params(**kw)


def test_seed_plan_hand_computed():
    """Seed k's init and order seeds per noise mode, offsets added to every seed (0 included)."""
    from decision_pipeline.lm.training import seed_plan
    p = _params(noise="both", init_offset=10, order_offset=100)
    assert [seed_plan(p, 3, k) for k in (0, 2)] == [{"init": 13, "order": 103}, {"init": 15, "order": 105}]
    assert seed_plan(_params(noise="init"), 3, 2) == {"init": 5, "order": 3}
    assert seed_plan(_params(noise="order"), 3, 2) == {"init": 3, "order": 5}


def test_every_seed_zero_included_trains_on_a_seeded_shuffle(tiny, questions):
    """Seed 0 is not the selection's own order (which differs between arms): it is the shuffle of its
    order seed, like every other seed. Seed 1 under `init` = the same order with init seed+1; under
    `order` = another order with the same init."""
    import torch

    from decision_pipeline.lm.training import encode_dev, pretrain, train_and_eval
    torch.set_num_threads(1)
    _, tok = tiny
    texts = [q["question"] for q in questions[:40]]
    dev_rows = [{"text": q["question"], "register": r} for q, r in zip(questions[40:46], ["a", "b"] * 3)]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    dev = encode_dev(tok, dev_rows)

    def ref(order_seed: int, init_seed: int) -> float:
        order = seed_order(len(ids), 30, order_seed, 0)
        return train_and_eval([ids[i] for i in order], dev, tok, _params(), 256, order_seed, "ref",
                              init_seed=init_seed)[2]["ppl"]

    seed0 = ref(3, 3)
    assert seed0 != train_and_eval(ids, dev, tok, _params(), 256, 3, "selection order", init_seed=3)[2]["ppl"]
    for noise, seed1 in (("init", ref(3, 4)), ("order", ref(4, 3))):
        _, _, m = pretrain("curated", texts, dev_rows, tok, _params(noise=noise), budget=256, seed=3, n_budget_docs=30)
        assert m["seeds"]["ppl"][:2] == [seed0, seed1], noise
        assert m["seeds"]["noise"] == noise and len(m["seeds"]["plan"]) == m["seeds"]["n"]

import math

import numpy as np
import pytest
import torch

from decision_pipeline.decision.sft.data import (MAX_LABELS, JointCollator, build_joint_examples, readout_example,
                                                 readout_target)
from decision_pipeline.decision.sft.config import SFTParams, lr_rule
from decision_pipeline.decision.sft.loss import joint_losses
from decision_pipeline.decision.sft.trainer import train_joint
from decision_pipeline.lm.model import load_model
from tests.micro import micro_params


def sft_params(**changes) -> SFTParams:
    """The micro profile's sft with what these tests depend on: a fixed rate (train_joint is given it),
    3 steps (the loss-row counts below) and one thread; each test replaces what it tests."""
    return micro_params(SFTParams, "sft", **{"lr_source": "fixed", "max_steps": 3, "threads": 1, **changes})


def test_readout_target_mixes_gold_and_votes():
    q = {"options": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "gold": "b"}
    assert readout_target(q, [0, 0, 1, None], alpha=0.5) == pytest.approx([1 / 3, 0.5 + 1 / 6, 0.0])
    assert readout_target(q, [None, None], alpha=0.5) == [0.0, 1.0, 0.0]  # no parsed vote: gold only
    assert sum(readout_target(q, [2, 2, 1], alpha=0.3)) == pytest.approx(1.0)


def test_soft_target_loss_matches_hand_computation():
    vocab = 6
    logits = torch.zeros((1, 3, vocab))
    logits[0, 2, 4], logits[0, 2, 5] = math.log(3.0), 0.0  # label logits at the readout position: p = 3/4, 1/4
    batch = {"input_ids": torch.tensor([[1, 2, 3]]), "loss_weights": torch.zeros((1, 3)),
             "readout_pos": torch.tensor([2]), "readout_label_ids": torch.tensor([[4, 5] + [-1] * (MAX_LABELS - 2)]),
             "readout_target": torch.tensor([[0.5, 0.5] + [0.0] * (MAX_LABELS - 2)])}
    chain, readout = joint_losses(logits, batch)
    assert float(chain) == 0.0  # no weighted tokens
    assert float(readout) == pytest.approx(-(0.5 * math.log(0.75) + 0.5 * math.log(0.25)), abs=1e-6)


def test_chain_loss_is_weighted_token_nll():
    logits = torch.zeros((1, 3, 4))  # uniform: every token costs log 4
    batch = {"input_ids": torch.tensor([[0, 1, 2]]), "loss_weights": torch.tensor([[0.0, 0.5, 1.0]]),
             "readout_pos": torch.tensor([-1]), "readout_label_ids": torch.full((1, MAX_LABELS), -1),
             "readout_target": torch.zeros((1, MAX_LABELS))}
    chain, readout = joint_losses(logits, batch)
    assert float(chain) == pytest.approx(math.log(4)) and float(readout) == 0.0


def test_collator_and_examples(tiny, questions):
    _, tok = tiny
    q = questions[0]
    ex = readout_example(tok, q, readout_target(q, [], 0.5), prompt_loss_weight=0.0)
    assert ex["readout_pos"] == len(ex["input_ids"]) - 1 and tok.decode(ex["input_ids"]).endswith("Answer:")
    kept = [{"id": "x", "question_id": q["id"], "text": "<think>\nok\n</think>\nAnswer: A"}]
    examples, too_long = build_joint_examples(tok, [q], kept, {}, 0.5, 1.0, 512)
    assert [e["kind"] for e in examples] == ["chain", "readout"] and too_long == 0
    batch = JointCollator(tok.pad_token_id)(examples)
    assert batch["input_ids"].shape[0] == 2 and batch["loss_weights"][1].sum() == len(examples[1]["input_ids"])
    assert build_joint_examples(tok, [q], kept, {}, 0.5, 1.0, max_length=5)[1] == 1


def test_lr_rule_prefers_lowest_nll_then_lower_rate():
    assert lr_rule({0.001: 0.9, 0.003: 0.8, 0.01: 1.2}) == 0.003
    assert lr_rule({0.001: 0.8, 0.003: 0.8}) == 0.001


def test_training_is_deterministic_on_cpu(tiny_dir, tiny, questions, tmp_path):
    _, tok = tiny
    kept = [{"id": f"c{i}", "question_id": q["id"], "text": "<think>\nx\n</think>\nAnswer: A"} for i, q in enumerate(questions[:8])]
    examples, _ = build_joint_examples(tok, questions[:8], kept, {}, 0.5, 1.0, 512)
    s = sft_params(train_embeddings=True)
    runs = []
    for k in range(2):
        model, _, parts = train_joint(load_model(tiny_dir), tok, examples, s, 1e-3, 3, tmp_path / f"w{k}")
        runs.append((parts, {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}))
    assert runs[0][0] == runs[1][0] and len(runs[0][0]) == 3
    assert all(torch.equal(runs[0][1][n], runs[1][1][n]) for n in runs[0][1])
    assert any("lora" in n for n in runs[0][1]) and any("token" in n for n in runs[0][1])


def test_long_chains_train_one_per_forward_pass():
    from decision_pipeline.decision.sft.trainer import LengthAwareBatchSampler
    lengths = [10, 50, 12, 9000, 11, 20000, 8, 13, 14]
    sampler = LengthAwareBatchSampler(lengths, batch_size=3, long_tokens=8192, seed=1)
    first, second = list(sampler), list(sampler)
    for batches in (first, second):
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))  # each example once per epoch
        assert all(len(b) == 1 for b in batches if any(lengths[i] > 8192 for i in b))
        assert all(len(b) <= 3 for b in batches)
    assert len(first) == len(sampler) == 2 + 3
    assert first != second  # reshuffled per epoch
    assert list(LengthAwareBatchSampler(lengths, 3, 8192, seed=1)) == first  # reproducible


def test_trainer_uses_the_length_aware_loader(tiny_dir, tiny, questions, tmp_path):
    _, tok = tiny
    kept = [{"id": f"c{i}", "question_id": q["id"], "text": "<think>\nx\n</think>\nAnswer: A"} for i, q in enumerate(questions[:6])]
    examples, _ = build_joint_examples(tok, questions[:6], kept, {}, 0.5, 1.0, 512)
    s = sft_params(max_steps=2, lora_targets=["q_proj"], long_chain_tokens=40)
    _, _, parts = train_joint(load_model(tiny_dir), tok, examples, s, 1e-3, 3, tmp_path / "w")
    assert len(parts) == 2 and all(np.isfinite([p["chain_loss"] for p in parts]))


def test_soft_items_keep_their_soft_target():
    q = {"options": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "gold": "b", "target": {"a": 0.2, "b": 0.7, "c": 0.1}}
    assert readout_target(q, [], alpha=0.5) == pytest.approx([0.2, 0.7, 0.1])
    assert readout_target(q, [0, 0], alpha=0.5) == pytest.approx([0.6, 0.35, 0.05])


def test_teacher_chains_are_not_votes():
    from decision_pipeline.decision.sft.trainer import parse_votes
    q = {"id": "q1", "options": [{"id": "a"}, {"id": "b"}], "gold": "a"}
    chains = [{"question_id": "q1", "source": "teacher", "text": "<think>\nx\n</think>\nAnswer: A"},
              {"question_id": "q1", "source": "base", "text": "<think>\ny\n</think>\nAnswer: B"}]
    assert parse_votes(chains, {"q1": q}) == {"q1": [1]}
    target = readout_target(q, parse_votes(chains, {"q1": q})["q1"], alpha=0.5)
    assert target == pytest.approx([0.5, 0.5])  # one model vote for B, not diluted by the solver's gold


def test_loss_log_is_written_at_every_checkpoint(tiny_dir, tiny, questions, tmp_path):
    _, tok = tiny
    kept = [{"id": f"c{i}", "question_id": q["id"], "text": "<think>\nx\n</think>\nAnswer: A"} for i, q in enumerate(questions[:6])]
    examples, _ = build_joint_examples(tok, questions[:6], kept, {}, 0.5, 1.0, 512)
    seen = []
    train_joint(load_model(tiny_dir), tok, examples, sft_params(max_steps=4, save_steps=2), 1e-3, 3, tmp_path / "w",
                on_save=lambda step, parts: seen.append((step, [p["step"] for p in parts])))
    assert seen == [(2, [1, 2]), (4, [1, 2, 3, 4])]


def _chain_examples(tok, questions, n=8):
    kept = [{"id": f"c{i}", "question_id": q["id"], "text": "<think>\nx\n</think>\nAnswer: A"}
            for i, q in enumerate(questions[:n])]
    return build_joint_examples(tok, questions[:n], kept, {}, 0.5, 1.0, 512)[0]


def test_seen_embedding_delta_trains_only_the_rows_the_examples_use(tiny_dir, tiny, questions, tmp_path):
    from decision_pipeline.decision.prompts import label_ids
    from decision_pipeline.decision.sft.trainer import embedding_rows
    model, tok = tiny
    examples = _chain_examples(tok, questions)
    rows = embedding_rows(model, tok, examples, "seen")
    assert {t for ex in examples for t in ex["input_ids"]} | set(label_ids(tok, 8)) == set(rows)
    assert len(rows) < model.get_input_embeddings().num_embeddings  # far fewer rows than the vocabulary
    assert embedding_rows(model, tok, examples, "all") == list(range(model.get_input_embeddings().num_embeddings))
    peft_model, _, _ = train_joint(load_model(tiny_dir), tok, examples,
                                   sft_params(train_embeddings=True, embedding_tokens="seen"), 1e-2, 3, tmp_path / "w")
    trained = peft_model.merge_and_unload().get_input_embeddings().weight
    base = load_model(tiny_dir).get_input_embeddings().weight
    changed = set(torch.nonzero((trained != base).any(dim=1)).flatten().tolist())
    assert changed and changed <= set(rows)


def test_cpu_bf16_autocast_is_applied_and_stays_close(tiny_dir, tiny, questions, tmp_path):
    """sft.bf16 turns on CPU bf16 autocast: the losses move (so it is on) but stay within 2% of fp32."""
    _, tok = tiny
    examples = _chain_examples(tok, questions)
    runs = [train_joint(load_model(tiny_dir), tok, examples, sft_params(bf16=bf16), 1e-3, 3, tmp_path / f"w{bf16}")[2]
            for bf16 in (False, True)]
    fp32, bf16 = ([r["chain_loss"] for r in parts] for parts in runs)
    assert fp32 != bf16
    assert bf16 == pytest.approx(fp32, rel=0.02)

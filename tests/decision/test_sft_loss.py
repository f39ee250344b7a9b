"""The joint SFT loss without full-vocabulary logits (sft/loss.py, issue 56).

Equivalence: the chunked loss from the model's last hidden state and its LM head against the full-logits
form (`logit_sums` over `model(...).logits`, the loss as it was), on the pipeline's tiny model with the
default profile's adapter (LoRA + the tied embedding delta) and on a random-weight 2-layer Qwen3 with a
32,000-token vocabulary: bitwise with one chunk, to 1e-5 relative with several, loss and LoRA gradients.
Memory: the traced peak of the loss falls with the chunk as the memory plan's formula says, on shapes
the plan's constants were not measured on.
"""
from __future__ import annotations

import pytest
import torch
from peft import get_peft_model

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.sft.config import SFTParams
from decision_pipeline.decision.sft.data import MAX_LABELS, JointCollator, build_joint_examples
from decision_pipeline.decision.sft.loss import (JointSums, chunked_sums, global_joint_losses, logit_sums,
                                                 mean_losses, model_sums)
from decision_pipeline.decision.sft.trainer import embedding_rows
from decision_pipeline.lm.finetune import lora_config
from decision_pipeline.lm.model import load_model
from tests.decision.test_sft import sft_params

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _tiny_peft(tiny_dir, tok, examples):
    """The tiny model with the default profile's adapter: LoRA on all linears + the tied embedding delta."""
    model = load_model(tiny_dir)
    rows = embedding_rows(model, tok, examples, "all")
    peft = get_peft_model(model, lora_config(4, 8, TARGETS, trainable_token_indices={"embed_tokens": rows}))
    torch.manual_seed(5)
    with torch.no_grad():   # adapters away from their zero init, so every gradient is non-trivial
        for p in peft.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    return peft


def _tiny_batch(tok, questions):
    kept = [{"id": f"c{i}", "question_id": q["id"],
             "text": "<think>\n" + " x" * (1 + 9 * (i % 3)) + "\n</think>\nAnswer: A"}
            for i, q in enumerate(questions[:3])]
    examples, _ = build_joint_examples(tok, questions[:3], kept, {}, 0.5, 0.5, 512)
    return examples, JointCollator(tok.pad_token_id)(examples)


def _step(model, fn) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The joint loss (readout weight 2) and the trainable parameters' gradients."""
    model.zero_grad()
    chain, readout = mean_losses(fn())
    loss = chain + 2.0 * readout
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


def _full(model, batch) -> JointSums:
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False).logits
    return logit_sums(logits, batch)


def _close(reference, other, rel: float) -> None:
    (loss0, grads0), (loss1, grads1) = reference, other
    assert float(loss1) == pytest.approx(float(loss0), rel=rel)
    assert set(grads0) == set(grads1) and any("lora_" in n for n in grads0)
    for n, g in grads0.items():
        scale = float(g.abs().max())
        assert scale > 0, n
        assert float((grads1[n] - g).abs().max()) <= rel * scale, n


def test_one_chunk_is_the_old_loss_bit_for_bit(tiny_dir, tiny, questions):
    """The default profile's chunk (sft.max_length) covers every row: the same floats as the full logits."""
    _, tok = tiny
    examples, batch = _tiny_batch(tok, questions)
    model = _tiny_peft(tiny_dir, tok, examples)
    assert (batch["readout_pos"] >= 0).sum() == 3 and batch["input_ids"].shape[1] < 512
    loss0, grads0 = _step(model, lambda: _full(model, batch))
    for chunk in (0, 512, batch["input_ids"].shape[1]):
        loss1, grads1 = _step(model, lambda: model_sums(model, batch, chunk)[0])
        assert torch.equal(loss1, loss0), chunk
        assert all(torch.equal(grads1[n], g) for n, g in grads0.items()), chunk


@pytest.mark.parametrize("chunk", [1, 3, 7, 16])
def test_chunks_match_the_full_logits_on_the_tiny_model(tiny_dir, tiny, questions, chunk):
    _, tok = tiny
    examples, batch = _tiny_batch(tok, questions)
    model = _tiny_peft(tiny_dir, tok, examples)
    _close(_step(model, lambda: _full(model, batch)), _step(model, lambda: model_sums(model, batch, chunk)[0]), 1e-5)


@pytest.fixture(scope="module")
def large_vocab():
    """A random-weight 2-layer Qwen3 with a 32,000-token vocabulary (tied), LoRA r4 on all linears, and a
    padded joint batch: a chain row, a readout row (readout at its last position) and a row with both."""
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=32000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=16, intermediate_size=128, tie_word_embeddings=True)
    model = get_peft_model(Qwen3ForCausalLM(cfg), lora_config(4, 8, TARGETS))
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    g = torch.Generator().manual_seed(1)
    lengths, n = [96, 41, 70], 96
    ids = torch.randint(0, 32000, (3, n), generator=g)
    mask = (torch.arange(n)[None] < torch.tensor(lengths)[:, None]).long()
    weights = torch.rand(3, n, generator=g) * mask
    weights[1] = 0.0                                                  # the readout row trains its readout only
    labels = torch.full((3, MAX_LABELS), -1)
    labels[1, :4], labels[2, :3] = torch.tensor([11, 12, 13, 14]), torch.tensor([20, 21, 22])
    target = torch.zeros(3, MAX_LABELS)
    target[1, :4], target[2, :3] = torch.tensor([0.7, 0.1, 0.1, 0.1]), torch.tensor([0.2, 0.3, 0.5])
    batch = {"input_ids": ids, "attention_mask": mask, "loss_weights": weights,
             "readout_pos": torch.tensor([-1, 40, 33]), "readout_label_ids": labels, "readout_target": target}
    return model, batch


@pytest.mark.parametrize("chunk", [5, 32, 40, 95])
def test_chunks_match_the_full_logits_with_a_large_vocabulary(large_vocab, chunk):
    model, batch = large_vocab
    reference = _step(model, lambda: _full(model, batch))
    _close(reference, _step(model, lambda: model_sums(model, batch, chunk)[0]), 1e-5)


def test_a_whole_row_chunk_is_bitwise_with_a_large_vocabulary(large_vocab):
    model, batch = large_vocab
    loss0, grads0 = _step(model, lambda: _full(model, batch))
    loss1, grads1 = _step(model, lambda: model_sums(model, batch, 96)[0])
    assert torch.equal(loss0, loss1) and all(torch.equal(grads1[n], g) for n, g in grads0.items())


def test_readout_rows_keep_their_order_across_chunks(large_vocab):
    """Each readout row's loss, in row order, whichever chunk held its position."""
    model, batch = large_vocab
    with torch.no_grad():
        full = _full(model, batch).readout
        chunked = model_sums(model, batch, 35)[0].readout      # row 2's position in chunk 0, row 1's in chunk 1
    assert full.shape == chunked.shape == (2,)
    torch.testing.assert_close(chunked, full, rtol=1e-5, atol=0)


def test_bf16_logits_through_chunks_stay_close_and_fp32(large_vocab):
    """The GPU path (bf16 logits, fp32 only where loss is) chunked, against the same path unchunked."""
    model, batch = large_vocab
    hidden = torch.randn(3, 96, 64, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    head = torch.nn.Linear(64, 32000, bias=False).to(torch.bfloat16)
    with torch.no_grad():
        whole = chunked_sums(hidden, head, batch, 0)
        parts = chunked_sums(hidden, head, batch, 16)
    assert whole.nll_sum.dtype == parts.nll_sum.dtype == torch.float32
    assert float(parts.nll_sum) == pytest.approx(float(whole.nll_sum), rel=1e-5)
    torch.testing.assert_close(parts.readout, whole.readout, rtol=1e-5, atol=0)
    assert float(parts.weight_sum) == float(whole.weight_sum)


def test_a_batch_without_readout_rows(large_vocab):
    model, batch = large_vocab
    plain = dict(batch, readout_pos=torch.full((3,), -1))
    with torch.no_grad():
        sums = model_sums(model, plain, 8)[0]
        chain, readout = mean_losses(sums)
        full_chain, _ = mean_losses(_full(model, plain))
    assert sums.readout is None and float(readout) == 0.0
    assert float(chain) == pytest.approx(float(full_chain), rel=1e-5)


def test_the_ddp_share_is_the_single_process_loss_in_a_world_of_one(large_vocab, tmp_path):
    """`global_joint_losses` (the DDP path) takes the same chunked sums: in a one-process group its share and
    its logged values are the single-process losses."""
    import torch.distributed as dist
    model, batch = large_vocab
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        with torch.no_grad():
            sums = model_sums(model, batch, 16)[0]
            chain, readout, chain_log, readout_log = global_joint_losses(sums, 1)
            single = mean_losses(sums)
    finally:
        dist.destroy_process_group()
    assert float(chain) == pytest.approx(float(single[0]), rel=1e-6) and chain_log == pytest.approx(float(chain))
    assert float(readout) == pytest.approx(float(single[1]), rel=1e-6) and readout_log == pytest.approx(float(readout))


def test_the_trainer_trains_the_same_step_with_chunks(tiny_dir, tiny, questions, tmp_path):
    """JointSFTTrainer's compute_loss (TRL's trainer, PEFT's adapter) with 4-position chunks: the first step's
    loss parts and gradients equal the one-chunk run's to 1e-5."""
    from decision_pipeline.decision.sft.trainer import train_joint
    from tests.decision.test_sft_accumulation import _FirstGrads
    _, tok = tiny
    examples, _ = _tiny_batch(tok, questions)
    runs = []
    for chunk in (512, 4):
        grabber = _FirstGrads()
        s = sft_params(batch_size=len(examples), max_steps=1, loss_chunk_tokens=chunk)
        _, _, parts = train_joint(load_model(tiny_dir), tok, examples, s, 1e-3, 3, tmp_path / f"c{chunk}",
                                  callbacks=[grabber])
        runs.append((parts[0], grabber.grads))
    (whole, g0), (chunked, g1) = runs
    assert chunked["chain_loss"] == pytest.approx(whole["chain_loss"], rel=1e-5)
    assert chunked["readout_loss"] == pytest.approx(whole["readout_loss"], rel=1e-5)
    assert g0 and set(g0) == set(g1)
    for n, g in g0.items():
        assert float((g1[n] - g).abs().max()) <= 1e-5 * float(g.abs().max()) + 1e-12, n


# ------------------------------------------------------------------------------------------------ memory

def test_peak_memory_falls_with_the_chunk_as_the_plan_says():
    """The loss's traced peak (every storage it creates, forward and backward) at 2 rows x 769 positions of a
    16-wide hidden state, chunks of 48 to 768 positions and the whole row: falling with the chunk, each within
    5% of `plan.loss_head_bytes` (whose constants come from other shapes: 1 row, hidden 8 and 32)."""
    from decision_pipeline.preflight.loss_trace import TRACE_VOCAB, chunked_peak
    from decision_pipeline.preflight.plan import ModelShape, loss_head_bytes
    shape = ModelShape(hidden=16, layers=1, heads=1, kv_heads=1, head_dim=16, intermediate=16, vocab=TRACE_VOCAB,
                       tied=True, max_positions=1024)
    rows, tokens = 2, 768
    kept = rows * (tokens + 1)
    peaks, planned = [], []
    for chunk in (48, 96, 192, 384, 0):
        peaks.append(chunked_peak(tokens, chunk, 16, rows))
        planned.append(loss_head_bytes("joint", shape, kept, True, rows * chunk))
    assert all(a < b for a, b in zip(peaks, peaks[1:])), peaks
    for peak, plan in zip(peaks, planned):
        assert plan == pytest.approx(peak, rel=0.05), (peak, plan)
    assert peaks[0] < peaks[-1] / 10      # 48 of 769 positions: a sixteenth of the logits


# --------------------------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("chunk, says", [(0, "expected a value >= 1"), (-8, "expected a value >= 1"),
                                         (513, "larger than sft.max_length (512)")])
def test_a_bad_chunk_is_refused_naming_the_key(tmp_path, capsys, chunk, says):
    """`make check` (config check): one line naming sft.loss_chunk_tokens, exit 2."""
    import yaml

    from tests.pipeline.test_params_check import PARAMS, _check_in_process
    code, errors = _check_in_process(tmp_path, capsys, PARAMS, "--sets", f"sft.loss_chunk_tokens={chunk}")
    assert code == 2 and len(errors) == 1, errors
    assert "sft.loss_chunk_tokens" in errors[0] and says in errors[0]


def test_a_chunk_longer_than_the_rows_is_refused_by_the_params_themselves():
    with pytest.raises(PipelineError, match=r"^params.yaml: sft\.loss_chunk_tokens \(600\) is larger than "
                                            r"sft\.max_length \(512\)"):
        sft_params(loss_chunk_tokens=600)
    assert sft_params(loss_chunk_tokens=512).loss_chunk_tokens == 512

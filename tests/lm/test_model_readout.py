import numpy as np
import pytest
import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.prompts import chain_until_close, label_ids, post_chain_prefix, readout_prefix, thinking_prefix
from decision_pipeline.lm.backends import SamplingSettings, make_backend
from decision_pipeline.lm.model import TinyModelSpec, build_tiny_model, load_model
from decision_pipeline.lm.readout import continuation_nll, label_logits, next_token_logits


def test_factory_is_seeded_and_sized(tiny):
    model, tok = tiny
    spec = TinyModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=512)
    a = build_tiny_model(spec, len(tok), tok.pad_token_id, tok.eos_token_id, seed=3)
    b = build_tiny_model(spec, len(tok), tok.pad_token_id, tok.eos_token_id, seed=3)
    c = build_tiny_model(spec, len(tok), tok.pad_token_id, tok.eos_token_id, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(x, y) for x, y in zip(a.parameters(), c.parameters()))
    assert a.config.vocab_size == len(tok) and a.config.model_type == "qwen2"


def test_bad_shape_and_missing_dir_are_clear_errors(tmp_path):
    with pytest.raises(PipelineError, match="divisible"):
        build_tiny_model(TinyModelSpec(hidden_size=30, num_layers=1, num_heads=4, intermediate_size=64, max_positions=64), 100, 0, 1, 0)
    with pytest.raises(PipelineError, match="not a model directory"):
        load_model(tmp_path)


def test_batched_readout_equals_single_unpadded_forward(tiny, questions):
    model, tok = tiny
    qs = questions[:7]
    prefixes = [readout_prefix(tok, q) for q in qs]
    labels = [label_ids(tok, len(q["options"])) for q in qs]
    batched = label_logits(model, prefixes, labels, tok.pad_token_id, batch_size=4)
    for p, lab, got in zip(prefixes, labels, batched):
        with torch.no_grad():
            single = model(input_ids=torch.tensor([p])).logits[0, -1, lab].numpy()
        np.testing.assert_allclose(got, single, atol=1e-4)
    assert [len(x) for x in batched] == [len(q["options"]) for q in qs]


def test_post_chain_readout_uses_exact_chain_ids(tiny, questions):
    model, tok = tiny
    q = questions[0]
    think = thinking_prefix(tok, q)
    # a chain whose ids would NOT survive decode→encode unchanged ("Ġ" + "a" split oddly)
    odd = tok.convert_tokens_to_ids(["Ċ", "a", "b"]) + [tok.convert_tokens_to_ids("</think>")]
    closed = chain_until_close(tok, odd + [5, 6])
    assert closed == odd
    prefix = post_chain_prefix(tok, think, closed)
    assert prefix[:len(think) + len(odd)] == think + odd
    assert chain_until_close(tok, odd[:-1]) is None


def test_hf_backend_deterministic_with_finish_reasons(tiny, questions):
    model, tok = tiny
    be = make_backend("hf", model=model, tokenizer=tok, batch_size=3)
    prompts = [thinking_prefix(tok, q) for q in questions[:4]]
    s = SamplingSettings(max_new_tokens=6, temperature=1.0, top_p=0.9, n=2, seed=7, stop_token_ids=(tok.eos_token_id,))
    a, b = be.generate(prompts, s), be.generate(prompts, s)
    assert len(a) == 8 and [c.token_ids for c in a] == [c.token_ids for c in b]
    assert [(c.prompt_index, c.sample_index) for c in a] == [(p, k) for p in range(4) for k in range(2)]
    for c in a:
        assert c.finish_reason in ("stop", "length")
        assert (c.finish_reason == "length") == (len(c.token_ids) == 6 and tok.eos_token_id not in c.token_ids)
        assert tok.decode(c.token_ids) == c.text
    greedy = be.generate(prompts[:1], SamplingSettings(max_new_tokens=5, temperature=0.0))
    logits = next_token_logits(model, prompts[:1], tok.pad_token_id)
    assert greedy[0].token_ids[0] == int(logits[0].argmax())


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(PipelineError, match="unknown; use one of hf, vllm, openai"):
        make_backend("llamacpp")


def test_vllm_backend_skips_cleanly_without_vllm(tiny_dir):
    pytest.importorskip("vllm")
    be = make_backend("vllm", model_path=tiny_dir, gpu_memory_utilization=0.2)
    assert be.name == "vllm"


def test_continuation_nll_matches_manual(tiny):
    model, tok = tiny
    prefix, cont = [1, 5, 9], [12, 14]
    total, n = continuation_nll(model, [prefix, prefix[:2]], [cont, cont], tok.pad_token_id)
    with torch.no_grad():
        manual = 0.0
        for p in (prefix, prefix[:2]):
            logp = torch.log_softmax(model(input_ids=torch.tensor([p + cont])).logits[0], -1)
            manual -= float(logp[len(p) - 1, cont[0]] + logp[len(p), cont[1]])
    assert n == 4 and abs(total - manual) < 1e-3

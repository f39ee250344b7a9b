"""The hf backend's static-cache compiled decode (`runtime.hf_decode`) against the eager path, on CPU.

On CPU the compiled modes capture the same static-cache graph through `aot_eager` (no CUDA graphs, no
kernel generation), so these tests check the path the GPU takes: the static cache, the fixed shapes
(padding to a bucket, a short batch filled) and that greedy tokens equal eager decoding's.
"""
from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from decision_pipeline.lm.backends import SamplingSettings
from decision_pipeline.lm.backends.hf import PROMPT_BUCKET, HFBackend, compile_backend, pad_for_compile


class _Tok:
    eos_token_id, pad_token_id = 2, 0

    def decode(self, ids, skip_special_tokens=False):
        return " ".join(map(str, ids))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = Qwen3Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      intermediate_size=96, vocab_size=300, tie_word_embeddings=True, max_position_embeddings=512,
                      initializer_range=0.5)   # wide weights: greedy tokens vary, so a mismatch would show
    return Qwen3ForCausalLM(cfg).eval()


def test_greedy_tokens_equal_eager(model):
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 300, (n,), generator=g).tolist() for n in (5, 9, 17, 30, 12)]
    greedy = SamplingSettings(max_new_tokens=12, temperature=0.0, stop_token_ids=(2,))
    eager = HFBackend(model, _Tok(), batch_size=2).generate(prompts, greedy)
    compiled = HFBackend(model, _Tok(), batch_size=2, decode="static_cudagraphs").generate(prompts, greedy)
    assert hasattr(model, "_compiled_call")          # transformers really took the compiled forward
    assert [c.token_ids for c in compiled] == [c.token_ids for c in eager]
    assert len({t for c in eager for t in c.token_ids}) > 10   # not one repeated token
    assert [(c.prompt_index, c.finish_reason) for c in compiled] == [(c.prompt_index, c.finish_reason) for c in eager]


def test_shapes_are_fixed_for_the_graph():
    ids, mask = pad_for_compile([[5, 6, 7], [8] * 70], rows=4, pad_id=0)
    assert ids.shape == (4, 2 * PROMPT_BUCKET)           # 70 tokens -> the next bucket; 2 rows -> 4
    assert mask.sum(1).tolist() == [3, 70, 3, 3]         # the short batch is filled with copies of its first row
    assert ids[0, -3:].tolist() == [5, 6, 7] and int(mask[0, :-3].sum()) == 0


def test_modes():
    assert compile_backend("static_cudagraphs", torch.device("cuda")) == "cudagraphs"
    assert compile_backend("static_inductor", torch.device("cuda")) == "inductor"
    assert compile_backend("static_inductor", torch.device("cpu")) == "aot_eager"
    with pytest.raises(ValueError, match="not one of"):
        HFBackend(None, _Tok(), decode="fast")


def test_param_reaches_the_backend(model):
    from decision_pipeline.lm.backends import backend_for_model
    from decision_pipeline.lm.runtime import RuntimeParams
    backend = backend_for_model("hf", model, _Tok(), "", 4, RuntimeParams(hf_decode="static_inductor"))
    assert backend.decode == "static_inductor"
    assert backend_for_model("hf", model, _Tok(), "", 4).decode == "eager"

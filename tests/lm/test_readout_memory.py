"""The readout projects only the positions it needs, packs batches by tokens, and answers in input order;
`runtime.device` refuses cuda on a CPU-only torch (#21)."""
import numpy as np
import pytest
import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.evaluate.answering import readout
from decision_pipeline.decision.prompts import label_ids, readout_prefix
from decision_pipeline.lm.backends.vllm import VLLMBackend
from decision_pipeline.lm.readout import continuation_nll, label_logits, token_batches
from decision_pipeline.lm.runtime import RuntimeParams, resolve_device, vllm_engine_kwargs


def test_token_batches_by_hand():
    # lengths 5, 3, 3, 9, 4 sorted stably: 1(3) 2(3) 4(4) 0(5) 3(9)
    # budget 12: [1,2] costs 2x3=6, +4 -> 3x4=12 ok, +0 -> 4x5=20 > 12 -> new batch; [0] then +3 -> 2x9 > 12
    assert token_batches([5, 3, 3, 9, 4], 12, 32) == [[1, 2, 4], [0], [3]]
    assert token_batches([5, 3, 3, 9, 4], 12, 2) == [[1, 2], [4, 0], [3]]
    assert token_batches([50, 2], 10, 8) == [[1], [0]]  # a prefix over the budget runs alone


def _hooked(model):
    seen = []
    handle = model.get_output_embeddings().register_forward_hook(lambda m, args, out: seen.append(tuple(args[0].shape)))
    return seen, handle


def test_lm_head_sees_only_the_last_position_and_batches_fit_the_budget(tiny, questions):
    model, tok = tiny
    qs = questions[:9]
    prefixes = [readout_prefix(tok, q) for q in qs]
    labels = [label_ids(tok, len(q["options"])) for q in qs]
    budget = 2 * max(len(p) for p in prefixes)
    seen, handle = _hooked(model)
    try:
        got = label_logits(model, prefixes, labels, tok.pad_token_id, batch_size=32, batch_tokens=budget)
    finally:
        handle.remove()
    assert seen and all(shape[1] == 1 for shape in seen), seen  # [rows, 1, hidden]: one position per row
    assert sum(shape[0] for shape in seen) == len(qs) and max(shape[0] for shape in seen) <= 2
    for p, lab, g in zip(prefixes, labels, got):  # input order, same numbers as one unpadded forward
        with torch.no_grad():
            single = model(input_ids=torch.tensor([p])).logits[0, -1, lab].numpy()
        np.testing.assert_allclose(g, single, atol=1e-4)


def test_token_packing_gives_the_same_readout_as_count_batches(tiny, questions):
    model, tok = tiny
    qs = questions[:12]
    wide = readout(model, tok, qs, batch_size=32, batch_tokens=10 ** 6)
    packed = readout(model, tok, qs, batch_size=32, batch_tokens=64)
    for a, b in zip(wide, packed):
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_continuation_nll_projects_only_the_continuation_positions(tiny):
    model, tok = tiny
    seen, handle = _hooked(model)
    try:
        continuation_nll(model, [[1, 5, 9, 11, 13, 4], [1, 5]], [[12, 14], [3]], tok.pad_token_id)
    finally:
        handle.remove()
    assert seen == [(2, 3, model.config.hidden_size)]  # 1 + the longest continuation, not all 8 positions


def test_cuda_on_a_cpu_only_torch_is_one_line_naming_the_key_and_fix(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(PipelineError, match=r"runtime\.device is cuda.*make gpu-install") as err:
        resolve_device("cuda")
    assert "\n" not in str(err.value)
    assert resolve_device("auto").type == "cpu" and resolve_device("cpu").type == "cpu"


def test_load_model_refuses_cuda_without_a_gpu(tiny_dir, monkeypatch):
    from decision_pipeline.lm.model import load_model
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(PipelineError, match="runtime.device"):
        load_model(tiny_dir, device="cuda")
    assert next(load_model(tiny_dir, device="cpu").parameters()).dtype == torch.float32


def test_vllm_memory_knobs_come_from_runtime():
    p = RuntimeParams(device="cuda", readout_batch_tokens=4096, vllm_gpu_memory_utilization=0.5,
                      vllm_max_model_len=40960)
    assert vllm_engine_kwargs(p) == {"gpu_memory_utilization": 0.5, "max_model_len": 40960}
    assert vllm_engine_kwargs(RuntimeParams())["max_model_len"] is None  # 0 = the model's own
    default = VLLMBackend.__init__.__defaults__[0]
    assert default == RuntimeParams().vllm_gpu_memory_utilization

import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

from decision_pipeline.lm.sampling import TemperatureTopP


def _reference(scores, temperature, top_p):
    ids = torch.zeros((scores.shape[0], 1), dtype=torch.long)
    return TopPLogitsWarper(top_p)(ids, TemperatureLogitsWarper(temperature)(ids, scores.clone()))


def test_same_nucleus_as_transformers_peaked_and_flat_rows():
    gen = torch.Generator().manual_seed(0)
    peaked = torch.randn(8, 4096, generator=gen) * 6      # nucleus inside the top 64
    flat = torch.randn(8, 4096, generator=gen) * 0.1      # nucleus far past the top 64: full-sort fallback
    for scores in (peaked, flat, torch.cat([peaked, flat])):
        for t, p in ((0.7, 0.95), (1.0, 0.5), (1.3, 0.99)):
            ours = TemperatureTopP(t, p)(None, scores)
            ref = _reference(scores, t, p)
            assert torch.equal(torch.isinf(ours), torch.isinf(ref))
            assert torch.allclose(ours[~torch.isinf(ours)], ref[~torch.isinf(ref)])


def test_top_p_one_is_temperature_only():
    scores = torch.randn(3, 50)
    assert torch.allclose(TemperatureTopP(0.5, 1.0)(None, scores), scores / 0.5)

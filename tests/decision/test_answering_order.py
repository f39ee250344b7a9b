"""The readout runs before the generation engine is built, with the runtime's token budget (#21)."""
from decision_pipeline.decision.evaluate import answering
from decision_pipeline.decision.evaluate.config import AnsweringParams
from decision_pipeline.decision.evaluate.answering import answer_questions
from decision_pipeline.lm.runtime import RuntimeParams


def test_readout_comes_before_the_engine_and_uses_the_runtime_budget(tiny_dir, questions, monkeypatch):
    events = []
    real_logits, real_backend = answering.label_logits, answering.backend_for_model

    def logits_spy(*args, desc="readout", batch_tokens=0, **kwargs):
        events.append((desc, batch_tokens))
        return real_logits(*args, desc=desc, batch_tokens=batch_tokens, **kwargs)

    def backend_spy(*args, **kwargs):
        events.append(("engine", None))
        return real_backend(*args, **kwargs)

    monkeypatch.setattr(answering, "label_logits", logits_spy)
    monkeypatch.setattr(answering, "backend_for_model", backend_spy)
    p = AnsweringParams(backend="hf", batch_size=4, max_new_tokens=4, temperature=1.0, top_p=1.0, threads=1)
    runtime = RuntimeParams(device="cpu", readout_batch_tokens=300)
    logits, chains = answer_questions(tiny_dir, questions[:3], p, 0, runtime)
    assert events[:2] == [("readout", 300), ("engine", None)]
    assert all(e == ("post-chain", 300) for e in events[2:])
    assert len(logits) == len(chains) == 3

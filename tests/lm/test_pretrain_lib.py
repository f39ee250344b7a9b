"""Pretraining as the `pretrain` stage runs it, and the pipeline tokenizer: small, seeded, exact."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from decision_pipeline.common.errors import PipelineError

from decision_pipeline.questions.schema import LABELS
from decision_pipeline.lm.bpe import TokenizerParams, load_tokenizer, train_pipeline_tokenizer
from decision_pipeline.lm.model import TinyModelSpec
from decision_pipeline.lm.training import PretrainParams, encode_dev, pretrain
from tests.micro import tiny_pretrain_params

torch.set_num_threads(1)


def params(**overrides) -> PretrainParams:
    """Tiny pretraining params from the micro profile (#22): lr, epochs, seeds 2, noise, launch live there."""
    return tiny_pretrain_params(**overrides)


@pytest.fixture(scope="module")
def texts(questions):
    return [q["question"] for q in questions[:60]]


@pytest.fixture(scope="module")
def dev_rows(questions):
    return [{"text": q["question"], "register": reg} for q, reg in zip(questions[60:70], ["a", "b"] * 5)]


def test_every_selection_trains_over_the_seeds(tiny, texts, dev_rows):
    """Each arm gets the same seeds (init and order), so arms compare as mean and range, not one run."""
    _, tok = tiny
    model, log, metrics = pretrain("curated", texts, dev_rows, tok, params(), budget=400, seed=1)
    assert metrics["train"]["tokens"] == 400 and metrics["train"]["steps"] == len(log) == 400 // (16 * 4)
    assert set(metrics["heldout"]["registers"]) == {"a", "b"}
    seeds = metrics["seeds"]
    assert seeds["n"] == 2 and seeds["ppl"][0] == metrics["heldout"]["ppl"] and seeds["ppl"][0] != seeds["ppl"][1]
    assert seeds["ppl_min"] <= seeds["ppl_mean"] <= seeds["ppl_max"]
    assert seeds["ppl_halfrange"] == pytest.approx((seeds["ppl_max"] - seeds["ppl_min"]) / 2, abs=1e-4)
    assert metrics["params"] == sum(p.numel() for p in model.parameters())
    _, _, other = pretrain("random", texts, dev_rows, tok, params(), budget=400, seed=1)
    assert other["seeds"]["n"] == 2  # the baseline gets the same treatment


def test_same_seed_same_run(tiny, texts, dev_rows):
    _, tok = tiny
    p = params(seeds=1)
    _, log_a, a = pretrain("curated", texts, dev_rows, tok, p, budget=400, seed=2)
    _, log_b, b = pretrain("curated", texts, dev_rows, tok, p, budget=400, seed=2)
    assert [r["loss"] for r in log_a] == [r["loss"] for r in log_b] and a["heldout"] == b["heldout"]


def test_encode_dev_groups_ids_and_bytes(tiny, dev_rows):
    _, tok = tiny
    dev = encode_dev(tok, dev_rows)
    assert set(dev) == {"a", "b"} and len(dev["a"][0]) == 5
    assert dev["b"][1] == sum(len(r["text"].encode()) for r in dev_rows if r["register"] == "b")


def test_budget_beyond_the_documents_is_an_error(tiny, texts, dev_rows):
    _, tok = tiny
    with pytest.raises(PipelineError, match="fewer than the budget"):
        pretrain("random", texts[:2], dev_rows, tok, params(), budget=10_000, seed=1)


def test_pipeline_tokenizer_learns_labels_and_reports(tmp_path, questions):
    docs = [q["question"] for q in questions[:100]]
    fast, metrics = train_pipeline_tokenizer(docs, questions[:40], TokenizerParams(vocab_size=800, min_frequency=2, model_max_length=256))
    assert metrics["vocab_size"] == len(fast) and metrics["corpus_docs"] == len(docs) + 2 * 40 + 10
    assert metrics["chars_per_token"] > 1
    fast.save_pretrained(str(tmp_path))
    reloaded = load_tokenizer(tmp_path)
    for c in LABELS:
        assert len(reloaded(f" {c}", add_special_tokens=False)["input_ids"]) == 1


def test_params_classes_have_no_code_defaults():
    """Every field comes from params.yaml and documents itself (`--help` prints the docs)."""
    for cls in (PretrainParams, TinyModelSpec, TokenizerParams):
        for f in dataclasses.fields(cls):
            assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, (cls, f.name)
            assert f.metadata.get("doc"), (cls, f.name)


def test_a_checkpointed_run_resumes_to_the_same_weights(tiny, texts, dev_rows, tmp_path):
    """Stop after 3 of 6 steps (the checkpoint of step 3 is what a kill leaves), resume: same weights, same log."""
    from decision_pipeline.lm.model import build_tiny_model
    from decision_pipeline.lm.training import StepCheckpoint, pack_tokens, train_on_tokens
    _, tok = tiny
    p = params(save_steps=3)
    tokens = pack_tokens([tok(t, add_special_tokens=False)["input_ids"] for t in texts], tok.eos_token_id, 400)
    fresh = lambda: build_tiny_model(p.model, len(tok), tok.pad_token_id, tok.eos_token_id, 7)  # noqa: E731
    straight = fresh()
    log_straight = train_on_tokens(straight, tokens, p, seed=7)
    stopped = fresh()
    ckpt = StepCheckpoint(tmp_path / "seed-0.pt", every=3)

    class Stop(Exception):
        pass

    def stop_after_three(step, _loss):
        if step == 3:
            raise Stop
    with pytest.raises(Stop):
        train_on_tokens(stopped, tokens, p, seed=7, on_step=stop_after_three, checkpoint=ckpt)
    resumed = fresh()  # a new process: weights from init, then the checkpoint
    log_resumed = train_on_tokens(resumed, tokens, p, seed=7, checkpoint=ckpt)
    assert [r["loss"] for r in log_resumed] == [r["loss"] for r in log_straight]
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


def _live_files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_live_metrics_hold_every_seed_and_step(tiny, texts, dev_rows, tmp_path):
    """The DVCLive files of a pretraining run: per seed, every step's loss and learning rate (#36.1)."""
    import json
    _, tok = tiny
    _, log, metrics = pretrain("curated", texts, dev_rows, tok, params(), budget=400, seed=1, live_dir=tmp_path / "live")
    files = _live_files(tmp_path / "live")
    assert sorted(files) == ["metrics.json"] + [f"plots/metrics/train/seed-{k}/{key}.tsv" for k in (0, 1)
                                                for key in ("loss", "lr")]
    rows = files["plots/metrics/train/seed-0/loss.tsv"].decode().splitlines()
    assert rows == ["step\tloss"] + [f"{r['step']}\t{r['loss']}" for r in log]  # seed 0's loss log, step by step
    summary = json.loads(files["metrics.json"])
    assert summary["step"] == len(log) == metrics["train"]["steps"]
    assert summary["train"] == {"seed-0": {"loss": log[-1]["loss"]}, "seed-1": {"loss": summary["train"]["seed-1"]["loss"]}}


def test_a_resumed_run_rebuilds_the_live_files_of_an_uninterrupted_one(tiny, texts, dev_rows, tmp_path):
    """Killed after step 4 (checkpoint at 3): the live files hold steps past the checkpoint and a torn summary;
    the resumed run replays the checkpoint's log and ends with the uninterrupted run's bytes."""
    from decision_pipeline.common.progress import LiveMetrics, TrainingProgress
    from decision_pipeline.lm.model import build_tiny_model
    from decision_pipeline.lm.training import StepCheckpoint, pack_tokens, train_on_tokens
    _, tok = tiny
    p = params(save_steps=3)
    tokens = pack_tokens([tok(t, add_special_tokens=False)["input_ids"] for t in texts], tok.eos_token_id, 400)
    fresh = lambda: build_tiny_model(p.model, len(tok), tok.pad_token_id, tok.eos_token_id, 7)  # noqa: E731
    live = lambda name: TrainingProgress("pretrain", live=LiveMetrics(tmp_path / name))  # noqa: E731
    train_on_tokens(fresh(), tokens, p, seed=7, progress=live("straight"))

    class Stop(Exception):
        pass

    def stop_after_four(step, _loss):
        if step == 4:
            (tmp_path / "resumed" / "metrics.json").write_text('{"train": {"lo')  # torn by the kill
            raise Stop
    ckpt = StepCheckpoint(tmp_path / "seed-0.pt", every=3)
    with pytest.raises(Stop):
        train_on_tokens(fresh(), tokens, p, seed=7, on_step=stop_after_four, checkpoint=ckpt, progress=live("resumed"))
    assert "4\t" in (tmp_path / "resumed" / "plots/metrics/train/loss.tsv").read_text()  # a step past the checkpoint
    train_on_tokens(fresh(), tokens, p, seed=7, checkpoint=ckpt, progress=live("resumed"))
    assert _live_files(tmp_path / "resumed") == _live_files(tmp_path / "straight")

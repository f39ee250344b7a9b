"""Tokenizers outside the pipeline's own BPE: think tokens, labels, pad, and a teacher's tokenizer.

Each "foreign" tokenizer here is a real byte-level BPE trained in the test on a few lines
without the markup tokens (the shape of SmolLM2's or Llama's problem), so every check can fail.
"""
from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.base.model import materialise_base
from decision_pipeline.lm.bpe import CHAT_TEMPLATE, load_tokenizer, train_bpe, wrap_fast
from decision_pipeline.lm.model import TinyModelSpec, build_tiny_model, load_model
from decision_pipeline.lm.tokenizer_checks import (PROBES, add_think_tokens, check_tokenizer, compare_tokenizers,
                                                   default_labels, endpoint_encoder, ensure_pad_token,
                                                   teacher_tokenizer_problems)

WORDS = "the cat dog sat on a mat and then it ran Answer A B C D E F G H which is larger".split()


def _corpus(seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(300)] + [" A B C D E F G H"] * 20


def foreign(*, pad: bool, chatml: bool, seed: int = 0, vocab: int = 400) -> PreTrainedTokenizerFast:
    """A byte-level BPE with ChatML markers but no <think>/</think> (and optionally no pad)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    from tokenizers import decoders
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.train_from_iterator(_corpus(seed), trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                              show_progress=False))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>" if pad else None)
    if chatml:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def test_pipeline_tokenizer_passes_and_foreign_one_is_told_what_is_wrong():
    own = wrap_fast(train_bpe(_corpus(), 400, required_tokens=[" A"], min_frequency=1), 128)
    assert check_tokenizer(own) == []  # all 8 labels both ways: the default profile's base passes
    problems = check_tokenizer(foreign(pad=False, chatml=False), default_labels(4))
    assert [p.split(" is ")[0] for p in problems[:2]] == ["'<think>'", "'</think>'"]
    assert all("base_model.add_think_tokens: true" in p for p in problems[:2])
    assert problems[2:] == [p for p in problems[2:] if "pad" in p] and len(problems) == 3


def test_a_split_label_is_reported():
    problems = check_tokenizer(foreign(pad=True, chatml=True), [" A", " zebra"])
    assert any(p.startswith("option label ' zebra' is") for p in problems)
    assert not any("' A'" in p for p in problems)


@pytest.mark.parametrize("chatml,expected", [(True, "<|im_end|>"), (False, "<|endoftext|>")])
def test_pad_fallback(chatml, expected):
    tok = foreign(pad=False, chatml=chatml)
    assert tok.pad_token is None
    assert ensure_pad_token(tok) == expected and tok.pad_token == expected
    assert ensure_pad_token(tok) is None  # already has one: untouched
    assert not any("pad" in p for p in check_tokenizer(tok, []))


def test_load_tokenizer_supplies_the_pad_fallback(tmp_path):
    foreign(pad=False, chatml=True).save_pretrained(tmp_path / "chatml")
    foreign(pad=False, chatml=False).save_pretrained(tmp_path / "plain")
    assert load_tokenizer(tmp_path / "chatml").pad_token == "<|im_end|>"
    assert load_tokenizer(tmp_path / "plain").pad_token == "<|endoftext|>"


def test_add_think_tokens_grows_the_embeddings():
    tok = foreign(pad=True, chatml=True)
    spec = TinyModelSpec(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_positions=64)
    model = build_tiny_model(spec, len(tok), tok.pad_token_id, tok.eos_token_id, seed=0)
    before = len(tok)
    assert add_think_tokens(model, tok) == ["<think>", "</think>"]
    assert len(tok) == before + 2 == model.get_input_embeddings().weight.shape[0] == model.config.vocab_size
    assert check_tokenizer(tok, default_labels(4)) == []
    assert tok("<think>\nx\n</think>", add_special_tokens=False)["input_ids"][-1] == tok.convert_tokens_to_ids("</think>")
    assert add_think_tokens(model, tok) == []  # idempotent
    # kept by a skip_special_tokens decode (vLLM's default, TRL's completions): the chain keeps its </think>
    ids = tok("<think>\nx\n</think>\nAnswer: B", add_special_tokens=False)["input_ids"]
    assert "</think>" in tok.decode(ids, skip_special_tokens=True)


def _model_dir(tmp_path, tok):
    spec = TinyModelSpec(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_positions=64)
    model = build_tiny_model(spec, len(tok), tok.pad_token_id or 0, tok.eos_token_id, seed=0)
    src = tmp_path / "src"
    model.save_pretrained(src)
    tok.save_pretrained(src)
    return src


def test_base_model_without_think_tokens_fails_or_is_fixed_by_the_key(tmp_path):
    src = _model_dir(tmp_path, foreign(pad=False, chatml=True))
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(PipelineError, match=r"src: base_model.path's tokenizer: '<think>' is \d tokens .*"
                                            r"add_think_tokens: true .*\(\+1 more\)"):
        materialise_base(src, dest, add_think=False)
    assert list(dest.iterdir()) == []  # nothing written
    assert materialise_base(src, dest, add_think=True) == ["<think>", "</think>"]
    tok, model = load_tokenizer(dest), load_model(dest)
    assert check_tokenizer(tok, []) == [] and tok.pad_token == "<|im_end|>"
    assert model.get_input_embeddings().weight.shape[0] == len(tok)


def test_teacher_tokenizer_comparison_locally_and_over_http():
    base = foreign(pad=True, chatml=True)
    other = foreign(pad=True, chatml=True, seed=1, vocab=350)
    enc = lambda t: lambda s: t(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    assert compare_tokenizers(base, len(base), enc(base)) == []
    assert [p.split(",")[0] for p in compare_tokenizers(base, len(base) + 7, enc(base))] == [
        f"teacher tokenizer has {len(base) + 7} tokens"]
    problems = compare_tokenizers(base, len(other), enc(other))  # same size here, other merges
    assert len(problems) == 1 and problems[0].startswith("teacher tokenizer encodes")

    served = {"tok": base}

    class Tokenize(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - vLLM's route, at the server root
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            ids = served["tok"](body["prompt"], add_special_tokens=False)["input_ids"] if self.path == "/tokenize" else None
            data = json.dumps({"tokens": ids, "count": len(ids or [])}).encode()
            self.send_response(200 if ids is not None else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Tokenize)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        assert compare_tokenizers(base, None, endpoint_encoder(url, "t")) == []
        assert teacher_tokenizer_problems(base, url, "t") == []
        served["tok"] = other
        assert "encodes" in compare_tokenizers(base, None, endpoint_encoder(url, "t"))[0]
        [line] = teacher_tokenizer_problems(base, url, "t")
        assert line.startswith("generate.teacher_base_url: teacher tokenizer encodes")
        [line] = teacher_tokenizer_problems(base, url + "/nope", "t")
        assert line.startswith("generate.teacher_base_url: ") and "/tokenize" in line
        with pytest.raises(PipelineError, match="must expose vLLM's /tokenize"):
            endpoint_encoder(url + "/nope", "t")(PROBES[0])
    finally:
        server.shutdown()
        server.server_close()

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.bpe import load_tokenizer, render_chat, train_bpe
from decision_pipeline.lm.bpe import question_chats

TEXTS = ["héllo wörld  café\n\n\tx  123456 don't stop", "<|im_start|>user\nIs it?<|im_end|>\n<think>\nok</think>\nAnswer: B"]


def test_ids_identical_after_reload_through_autotokenizer(tiny_dir, questions):
    raw = PreTrainedTokenizerFast(tokenizer_file=f"{tiny_dir}/tokenizer.json")
    reloaded = AutoTokenizer.from_pretrained(tiny_dir)
    # the trap: with a qwen2 config beside it, transformers rebuilds Qwen2Tokenizer
    assert type(reloaded).__name__ == "Qwen2Tokenizer"
    texts = question_chats(questions[:80]) + TEXTS
    for text in texts:
        assert reloaded(text)["input_ids"] == raw(text)["input_ids"], text
        assert reloaded.decode(reloaded(text)["input_ids"]) == text


def test_chat_template_marks_assistant_and_matches_render(tiny):
    _, tok = tiny
    msgs = [{"role": "user", "content": "Is it?"}, {"role": "assistant", "content": "Answer: A"}]
    assert tok.apply_chat_template(msgs, tokenize=False) == render_chat(msgs)
    assert tok.apply_chat_template(msgs[:1], tokenize=False, add_generation_prompt=True) == render_chat(msgs[:1], True)
    out = tok.apply_chat_template(msgs, return_assistant_tokens_mask=True, return_dict=True)
    masked = [i for i, m in zip(out["input_ids"], out["assistant_masks"]) if m]
    assert tok.decode(masked) == "Answer: A<|im_end|>"


def test_special_tokens_are_single_ids(tiny):
    _, tok = tiny
    for t in ["<|im_start|>", "<|im_end|>", "<think>", "</think>", " A", " H"]:
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1, t
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


def test_required_token_missing_is_a_clear_error():
    with pytest.raises(PipelineError, match="not a single token"):
        train_bpe(["aaa bbb"] * 5, 300, required_tokens=[" zq"], min_frequency=2)


def test_missing_tokenizer_dir_is_a_clear_error(tmp_path):
    with pytest.raises(PipelineError, match="not found"):
        load_tokenizer(tmp_path / "nope")

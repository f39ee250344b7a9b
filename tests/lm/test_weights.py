"""`lm.weights`: a model directory's weight files checked against config.json from the headers alone.

The reference for "loadable" is the real loader: safetensors' own reader and transformers'
`from_pretrained` on the same files. Every file they refuse is refused here too (a fuzz over
truncations and byte flips of the header), and real checkpoints of several architectures pass.
"""
from __future__ import annotations

import json
import random
import shutil
import struct
from pathlib import Path

import pytest
import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.model import TinyModelSpec, build_tiny_model, load_model
from decision_pipeline.lm.weights import (WeightsError, check_weights, checkpoint_tensors, read_safetensors_header,
                                          weight_problems)

SPEC = TinyModelSpec(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=64)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A tiny Qwen2 (tied embeddings) saved as one model.safetensors, as the pipeline saves models."""
    d = tmp_path_factory.mktemp("weights") / "one"
    build_tiny_model(SPEC, vocab_size=300, pad_token_id=0, eos_token_id=1, seed=0).save_pretrained(d)
    return d


@pytest.fixture
def model_dir(saved, tmp_path) -> Path:
    d = tmp_path / "model"
    shutil.copytree(saved, d)
    return d


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("weights") / "sharded"
    build_tiny_model(SPEC, vocab_size=300, pad_token_id=0, eos_token_id=1, seed=0).save_pretrained(
        d, max_shard_size="30KB")
    return d


def _library_loads(path: Path) -> bool:
    from safetensors.torch import load_file
    try:
        load_file(str(path))
        return True
    except Exception:  # noqa: BLE001 - any refusal of the real reader counts
        return False


def test_a_saved_model_passes_and_its_header_is_read_without_the_data(model_dir):
    assert weight_problems(model_dir, "base_model.path") == []
    tensors = read_safetensors_header(model_dir / "model.safetensors")
    assert tensors["model.embed_tokens.weight"].shape == (300, 32) and "lm_head.weight" not in tensors  # tied
    assert tensors["model.layers.1.mlp.up_proj.weight"].shape == (64, 32)


@pytest.mark.parametrize("cut", [1, 10, 0.5, 0.99])
def test_a_truncated_file_is_one_line_naming_file_and_fix(model_dir, cut):
    f = model_dir / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:-cut] if isinstance(cut, int) else data[:int(len(data) * cut)])
    [line] = weight_problems(model_dir, "base_model.path")
    assert line.startswith(f"base_model.path: {f}: truncated: the header says the data runs to byte {len(data):,}")
    assert "copy model.safetensors again" in line and not _library_loads(f)


def _st(header: bytes, data_bytes: int) -> bytes:
    """A safetensors file from a hand-written header and `data_bytes` zero bytes of data."""
    return struct.pack("<Q", len(header)) + header + b"\0" * data_bytes


@pytest.mark.parametrize("body,match", [
    (b"", "0 bytes, too short for a safetensors header"),
    (b"\x00" * 5, "5 bytes, too short"),
    (struct.pack("<Q", 10**12) + b"{}", "header length 1000000000000 does not fit"),
    (struct.pack("<Q", 4) + b"[1] ", "header is a list, not an object"),
    (struct.pack("<Q", 4) + b"{x: ", "header is not JSON"),
    (_st(b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', 4),
     r"tensor a \(F32 \[2\]\) needs 8 bytes, its offsets give 4"),
    (_st(b'{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}', 4),
     r"header entry a is \{\"dtype\": \"F32\", \"shape\": \[-1\].*not \{dtype, shape, data_offsets\}"),
    (_st(b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', 8), "tensor a starts at data byte 4, "
                                                                              "expected 0"),
])
def test_a_file_that_is_not_safetensors_is_one_line(model_dir, body, match):
    (model_dir / "model.safetensors").write_bytes(body)
    [line] = weight_problems(model_dir, "base_model.path")
    assert line.startswith(f"base_model.path: {model_dir / 'model.safetensors'}: ")
    assert __import__("re").search(match, line), line


def test_fuzz_everything_the_real_reader_refuses_is_refused_here(saved, tmp_path):
    """Random truncations, byte flips in the 8-byte length and the JSON header, bytes appended: whenever
    safetensors' own reader refuses the file, the check refuses it (one line, never an exception)."""
    data = (saved / "model.safetensors").read_bytes()
    header_end = 8 + struct.unpack("<Q", data[:8])[0]
    rng = random.Random(33)
    d = tmp_path / "fuzz"
    shutil.copytree(saved, d)
    f = d / "model.safetensors"
    refused = 0
    for trial in range(150):
        kind = trial % 3
        if kind == 0:
            mutated = data[:rng.randrange(len(data))]
        elif kind == 1:
            b = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(header_end)] = rng.randrange(256)
            mutated = bytes(b)
        else:
            mutated = data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        f.write_bytes(mutated)
        problems = weight_problems(d, "k")
        assert all(isinstance(p, str) and p.startswith("k: ") and "\n" not in p for p in problems)
        if not _library_loads(f):
            refused += 1
            assert problems, f"trial {trial}: safetensors refuses the file, the check let it through"
    assert refused > 100


def test_no_weights_at_all(model_dir):
    (model_dir / "model.safetensors").unlink()
    [line] = weight_problems(model_dir, "base_model.path")
    assert line == (f"base_model.path: {model_dir}: no weights (model.safetensors, or model.safetensors.index.json "
                    "with its shards, or pytorch_model.bin); copy the model's weight files into the directory (e.g. "
                    "`hf download <repo> --local-dir <dir>`)")


def test_shards_missing_truncated_or_not_matching_their_index(sharded, tmp_path):
    assert weight_problems(sharded) == [] and len(list(sharded.glob("model-*.safetensors"))) > 2
    d = tmp_path / "s"
    shutil.copytree(sharded, d)
    shards = sorted(d.glob("model-*.safetensors"))
    data = shards[1].read_bytes()
    shards[1].write_bytes(data[:len(data) // 2])
    [line] = weight_problems(d, "k")
    assert line.startswith(f"k: {shards[1]}: truncated")
    shards[1].unlink()
    [line] = weight_problems(d, "k")
    assert line == (f"k: {d / 'model.safetensors.index.json'}: lists 1 shard(s) that are not in the directory "
                    f"({shards[1].name}); copy every shard the index names")
    shutil.copy(sharded / shards[1].name, shards[1])
    index = json.loads((d / "model.safetensors.index.json").read_text())
    name = next(k for k, v in index["weight_map"].items() if v == shards[0].name)
    index["weight_map"][name] = shards[2].name
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    [line] = weight_problems(d, "k")
    assert f"1 tensor(s) are not in the shard it names ({name})" in line
    (d / "model.safetensors.index.json").write_text('{"weight_map": []}')
    assert "no weight_map of tensor name -> shard file" in weight_problems(d, "k")[0]


def _config(d: Path, **changes) -> None:
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))


def test_weights_of_another_config_are_named_with_shapes(model_dir):
    _config(model_dir, vocab_size=301)
    [line] = weight_problems(model_dir, "base_model.path")
    assert line.startswith(f"base_model.path: {model_dir / 'model.safetensors'}: model.embed_tokens.weight has shape "
                           f"[300, 32], {model_dir / 'config.json'} asks for [301, 32]")
    _config(model_dir, vocab_size=300, intermediate_size=96)
    [line] = weight_problems(model_dir)
    assert "mlp.down_proj.weight has shape [32, 64]" in line and "asks for [32, 96] (+5 more)" in line
    _config(model_dir, intermediate_size=64, tie_word_embeddings=False)   # an untied head must be stored
    [line] = weight_problems(model_dir)
    assert "1 tensor(s)" in line and "are in no weight file (lm_head.weight)" in line


def test_layer_counts_against_the_config(model_dir):
    cfg = json.loads((model_dir / "config.json").read_text())
    _config(model_dir, num_hidden_layers=3, layer_types=cfg["layer_types"] + cfg["layer_types"][:1])
    [line] = weight_problems(model_dir)
    assert "tensor(s)" in line and "model.layers.2." in line and "are in no weight file" in line
    _config(model_dir, num_hidden_layers=1, layer_types=cfg["layer_types"][:1])
    [line] = weight_problems(model_dir)
    assert "are unknown to" in line and "model.layers.1." in line


def test_an_unreadable_config_is_one_line(model_dir):
    (model_dir / "config.json").write_text("{")
    [line] = weight_problems(model_dir, "k")
    assert line.startswith(f"k: {model_dir / 'config.json'}: transformers cannot read it")


def test_other_architectures_pass_and_an_moe_gets_the_plain_checks(tmp_path):
    """Real checkpoints (gpt2 naming, untied llama, gemma2, an MoE whose experts transformers fuses on
    load) pass; for the MoE the exact names are unknown, so a shard of another layer count is still caught."""
    from transformers import AutoConfig, AutoModelForCausalLM
    small = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, vocab_size=128, head_dim=16)
    for model_type, kw in [("llama", dict(small, tie_word_embeddings=False)), ("gemma2", small),
                           ("gpt2", dict(n_embd=32, n_layer=2, n_head=2, vocab_size=128, bos_token_id=0,
                                         eos_token_id=0)),
                           ("qwen3_moe", dict(small, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16))]:
        d = tmp_path / model_type
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **kw)).save_pretrained(d)
        assert weight_problems(d) == [], model_type
    _config(tmp_path / "qwen3_moe", num_hidden_layers=3, layer_types=["full_attention"] * 3,
            mlp_only_layers=[])
    [line] = weight_problems(tmp_path / "qwen3_moe")
    assert "hold layers 0..1 (2 in all)" in line and "asks for 3 (num_hidden_layers)" in line


def test_torch_bin_checkpoints_are_checked_for_truncation(model_dir):
    from safetensors.torch import load_file
    state = load_file(str(model_dir / "model.safetensors"))
    (model_dir / "model.safetensors").unlink()
    torch.save(state, model_dir / "pytorch_model.bin")
    assert weight_problems(model_dir) == [] and checkpoint_tensors(model_dir) is None
    data = (model_dir / "pytorch_model.bin").read_bytes()
    (model_dir / "pytorch_model.bin").write_bytes(data[:-100])
    [line] = weight_problems(model_dir, "k")
    assert line.startswith(f"k: {model_dir / 'pytorch_model.bin'}: truncated")


def test_the_first_model_load_goes_through_the_check(model_dir):
    """`lm.model.load_model` (every stage's model load) refuses a truncated file in one line, not with a
    safetensors traceback; a good directory still loads."""
    assert load_model(model_dir) is not None
    f = model_dir / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-7])
    with pytest.raises(PipelineError, match=r"model\.safetensors: truncated: .*copy model\.safetensors again") as err:
        load_model(model_dir)
    assert isinstance(err.value, WeightsError) and "\n" not in str(err.value)
    f.unlink()
    with pytest.raises(PipelineError, match="no weights"):
        check_weights(model_dir)


def test_base_model_refuses_before_anything_is_copied(model_dir, tmp_path):
    """The stage's source check names base_model.path and runs before the copy into a temporary directory
    (the old traceback named a temp directory that no longer existed)."""
    from decision_pipeline.decision.base.config import BaseModelParams
    from decision_pipeline.decision.base.model import base_source
    p = BaseModelParams(source="path", nll_items=1, path=str(model_dir), threads=1, add_think_tokens=False)
    assert base_source(p, tmp_path / "unused") == model_dir
    (model_dir / "model.safetensors").write_bytes(b"\0" * 8)
    with pytest.raises(PipelineError, match=rf"^base_model\.path: {model_dir / 'model.safetensors'}: "):
        base_source(p, tmp_path / "unused")

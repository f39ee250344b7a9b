"""The memory plan: predicted peak GPU memory per GPU-heavy stage, from config.json and params alone.

Why analytic: a 4B model's first OOM otherwise arrives hours into a run. Every term is a formula of
the model's shapes (config.json), the merged params and the training loss path, computed before any
weight is loaded, so `make memory-plan` runs in seconds on a CPU machine. Checked on one H200
against the measured table (tests/fixtures/h200_memory.json, within 15% on every row; CPU test
tests/preflight/test_plan_fixture.py). What is exact and what is measured:
- bf16 weights and LoRA + AdamW: exact parameter counts (tests check them against a real model); at
  the training peak (the loss head's backward) the adapters' own grads do not exist yet unless an
  earlier micro-batch of the step left them (gradient accumulation);
- activations: with gradient checkpointing each layer's bf16 input (2 x hidden bytes per token);
  without it the per-layer saved tensors counted by fake tensors (NOTES "A memory plan without a GPU");
- the loss head: bytes per kept logit of the exact loss code (loss_trace.py measures them on CPU;
  TRL's Triton `selective_log_softmax` is the one measured constant); for the SFT stage's chunked joint
  loss, one chunk's logits plus per-token terms (traced the same way); or TRL's fused LM head, whose
  chunks never build the logits (a formula of its tiles from TRL's source);
- the CUDA context and allocator slack are not in `max_memory_allocated`: CUDA_OVERHEAD_GIB is added
  for the card budget only (`peak_gib`), not for the comparison with the measured table
  (`allocated_gib`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from decision_pipeline.common.errors import PipelineError

GIB = 1024 ** 3
BF16 = 2
FP32 = 4
LORA_BYTES_PER_PARAM = 16       # fp32 adapter weight + fp32 grad + two fp32 AdamW moments (PEFT keeps adapters fp32)
LORA_PEAK_BYTES_PER_PARAM = 12  # at the loss head's backward: weight + moments, the grads come later in backward
READOUT_LOGIT_BYTES = FP32      # per kept logit at inference: the float() copy of the kept rows
CUDA_OVERHEAD_GIB = 1.5         # CUDA context, cuBLAS workspaces, allocator fragmentation (not in max_memory_allocated)
VLLM_RESERVE_GIB = 2.0          # vLLM's profiling activations and CUDA graphs inside its own share
PROMPT_TOKENS = 512             # a question prompt with its options (the pipeline's prompts are shorter)
# TRL 1.16 `selective_log_softmax` with its Triton kernel (trl.kernels), bytes per kept logit: measured on one
# H200 (2026-12-04, tests/fixtures/h200_memory.json: +8.5 GiB per 256 + 8,192-token row of Qwen3-4B) and
# not traceable on a CPU; its torch fallback is traced (loss_trace.py)
SELECTIVE_TRITON_BYTES_PER_LOGIT = 6.0
# TRL's fused LM head (GRPOTrainer, `add_fused_lm_head`): tokens x vocabulary slice tiles (trl.kernels.chunked_logprob)
FUSED_TOKEN_TILE, FUSED_VOCAB_TILE = 4096, 32768
SFT_LOSSES = ("joint", "hf_loss")
GRPO_LOSSES = ("trl_fused_lm_head", "selective_log_softmax", "fp32_log_softmax")
LORA_SHAPES = {"q_proj": ("h", "q"), "k_proj": ("h", "kv"), "v_proj": ("h", "kv"), "o_proj": ("q", "h"),
               "gate_proj": ("h", "i"), "up_proj": ("h", "i"), "down_proj": ("i", "h")}


@dataclass(frozen=True)
class ModelShape:
    """The config.json numbers memory depends on (Qwen2/Qwen3/Llama-style decoder)."""
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    max_positions: int
    qk_norm: bool = True

    def dims(self) -> dict[str, int]:
        return {"h": self.hidden, "q": self.heads * self.head_dim, "kv": self.kv_heads * self.head_dim,
                "i": self.intermediate}


def read_shape(config_path: str | Path) -> ModelShape:
    """ModelShape from a model directory's config.json (or the file itself); a missing key is one line."""
    path = Path(config_path)
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():
        raise PipelineError(f"{path}: config.json not found; set base_model.path to a Hugging Face model "
                            "directory (or pass --model-config)")
    from decision_pipeline.common.textfile import read_text

    try:
        cfg = json.loads(read_text(path))  # UTF-8 without BOM (common/textfile.py): a BOM or UTF-16 is named
    except json.JSONDecodeError as exc:
        raise PipelineError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); copy the config.json that came "
                            "with the model") from None
    cfg = cfg.get("text_config", cfg) if isinstance(cfg, dict) else cfg
    if not isinstance(cfg, dict):
        raise PipelineError(f"{path}: holds {type(cfg).__name__}, not a JSON object; copy the config.json that came "
                            "with the model")
    try:
        heads = int(cfg["num_attention_heads"])
        return ModelShape(hidden=int(cfg["hidden_size"]), layers=int(cfg["num_hidden_layers"]), heads=heads,
                          kv_heads=int(cfg.get("num_key_value_heads") or heads),
                          head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // heads),
                          intermediate=int(cfg["intermediate_size"]), vocab=int(cfg["vocab_size"]),
                          tied=bool(cfg.get("tie_word_embeddings", False)),
                          max_positions=int(cfg.get("max_position_embeddings", 0)),
                          qk_norm=cfg.get("model_type", "qwen3").startswith("qwen3"))
    except KeyError as exc:
        raise PipelineError(f"{path}: key {exc.args[0]} missing; the memory plan needs a decoder config") from None
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, AttributeError) as exc:  # "", null, nan, 0 heads
        raise PipelineError(f"{path}: a size the memory plan reads is not a positive whole number ({exc}); copy the "
                            "config.json that came with the model") from None


def param_count(m: ModelShape) -> int:
    """Exact parameters of a Qwen3/Qwen2/Llama decoder (RMSNorm weights, no biases, optional q/k norms)."""
    d = m.dims()
    attn = d["h"] * d["q"] + 2 * d["h"] * d["kv"] + d["q"] * d["h"] + (2 * m.head_dim if m.qk_norm else 0)
    mlp = 3 * d["h"] * d["i"]
    per_layer = attn + mlp + 2 * d["h"]
    embed = m.vocab * d["h"] * (1 if m.tied else 2)
    return embed + m.layers * per_layer + d["h"]


def lora_param_count(m: ModelShape, r: int, targets: list[str]) -> int:
    """Exact LoRA parameters: r * (in + out) per targeted linear per layer."""
    d = m.dims()
    unknown = [t for t in targets if t not in LORA_SHAPES]
    if unknown:
        raise PipelineError(f"lora_targets: {unknown[0]!r} is not a decoder linear ({', '.join(LORA_SHAPES)})")
    return m.layers * sum(r * (d[LORA_SHAPES[t][0]] + d[LORA_SHAPES[t][1]]) for t in targets)


def kv_bytes_per_token(m: ModelShape) -> int:
    """K and V of every layer for one token, bf16."""
    return 2 * m.layers * m.kv_heads * m.head_dim * BF16


def act_bytes_per_token_layer(m: ModelShape) -> int:
    """Training tensors one decoder layer saves per token for backward (bf16, LoRA on all linears): counted
    with fake tensors on Qwen3-4B shapes (NOTES "A memory plan without a GPU works": within 1%)."""
    d = m.dims()
    return 28 * d["h"] + 12 * d["q"] + 8 * d["kv"] + 10 * d["i"]


def inference_bytes_per_token(m: ModelShape) -> int:
    """Transient activations of one layer at inference (bf16): the widest live tensors of a forward."""
    d = m.dims()
    return BF16 * (2 * d["h"] + d["q"] + 2 * d["kv"] + 3 * d["i"])


@dataclass
class StagePlan:
    """One stage's predicted peak: named terms in bytes, and the knob to turn when it does not fit."""
    stage: str
    terms: dict[str, float] = field(default_factory=dict)
    knobs: dict[str, str] = field(default_factory=dict)   # term -> the param that shrinks it
    note: str = ""
    refusal: str = ""                                     # set when the stage cannot start at all

    @property
    def allocated_gib(self) -> float:
        """What `torch.cuda.max_memory_allocated` should read (the terms without vLLM's share, which is
        another process's, and without the CUDA context)."""
        return sum(v for k, v in self.terms.items() if not k.startswith("vllm share")) / GIB

    @property
    def peak_gib(self) -> float:
        """What the card must hold: every term and the CUDA overhead."""
        return sum(self.terms.values()) / GIB + CUDA_OVERHEAD_GIB

    def biggest(self) -> str:
        tunable = {k: v for k, v in self.terms.items() if k in self.knobs} or self.terms
        return max(tunable, key=tunable.get)


def loss_head_bytes(loss: str, m: ModelShape, kept: int, triton: bool, chunk_tokens: int = 0) -> float:
    """Peak bytes of a training loss head over `kept` scored positions (forward + backward). `chunk_tokens`: the
    positions whose logits the joint loss builds at once (rows x sft.loss_chunk_tokens; 0 = all `kept`)."""
    from decision_pipeline.preflight.loss_trace import bytes_per_logit, chunked_constants
    if loss == "joint" and 0 < chunk_tokens < kept:
        # one chunk's logits during its backward (the others are recomputed when needed), plus the hidden state,
        # its gradient and the per-position targets of every token (sft/loss.py `chunked_sums`)
        per_logit, per_token, per_token_hidden = chunked_constants()
        return chunk_tokens * m.vocab * per_logit + kept * (per_token + per_token_hidden * m.hidden)
    if loss == "trl_fused_lm_head":
        # compact (Triton) scores only the kept positions: their bf16 hidden copy, fp32 hidden grad,
        # fp32 log-prob and entropy; one bf16 tile per pass, plus the torch path's fp32 tile temporaries
        tile = min(kept, FUSED_TOKEN_TILE) * min(m.vocab, FUSED_VOCAB_TILE)
        return kept * (6 * m.hidden + 8) + tile * (BF16 if triton else BF16 + 5 * FP32)
    if loss == "selective_log_softmax" and triton:
        return kept * m.vocab * SELECTIVE_TRITON_BYTES_PER_LOGIT
    name = "selective_log_softmax_torch" if loss == "selective_log_softmax" else loss
    if name not in ("joint", "hf_loss", "fp32_log_softmax", "selective_log_softmax_torch"):
        raise PipelineError(f"loss path {loss!r} is unknown; use one of {', '.join(SFT_LOSSES + GRPO_LOSSES)}")
    return kept * m.vocab * bytes_per_logit(name)


def training_peak(stage: str, m: ModelShape, tokens: int, kept: int, lora_r: int, targets: list[str], ckpt: bool,
                  loss: str, triton: bool = True, accumulation: int = 1, chunk_tokens: int = 0) -> StagePlan:
    """A LoRA training step's peak: weights, adapters + AdamW, activations, and the larger of the loss head and
    (with checkpointing) one recomputed layer's tensors, which are live at different moments of backward."""
    plan = StagePlan(stage)
    plan.terms["weights"] = param_count(m) * BF16
    lora_bytes = LORA_BYTES_PER_PARAM if accumulation > 1 else LORA_PEAK_BYTES_PER_PARAM
    plan.terms["lora + adamw"] = lora_param_count(m, lora_r, targets) * lora_bytes
    per_layer = act_bytes_per_token_layer(m)
    head = loss_head_bytes(loss, m, kept, triton, chunk_tokens)
    if ckpt:   # layer inputs kept, one layer recomputed at a time (after the loss head's memory is gone)
        plan.terms["activations"] = tokens * m.layers * m.hidden * BF16
        recompute = tokens * per_layer
        plan.terms["loss head" if head >= recompute else "recomputed layer"] = max(head, recompute)
    else:
        plan.terms["activations"] = tokens * m.layers * per_layer
        plan.terms["loss head"] = head
    plan.note = f"{tokens} tokens per forward, {kept} scored, loss {loss}" + (" (triton)" if triton and
                                                                               loss != "joint" else "")
    if loss == "joint":
        plan.note += f" in chunks of {chunk_tokens} logits" if 0 < chunk_tokens < kept else " (one chunk)"
    return plan


def readout_peak(m: ModelShape, prefix_tokens: int, n: int, batch_tokens: int, stage: str = "readout") -> StagePlan:
    """A readout forward of prefixes of one length packed by tokens (lm/readout.py: `logits_to_keep=1`,
    `use_cache=False`, a prefix longer than the budget goes alone)."""
    rows = max(1, min(n, batch_tokens // max(1, prefix_tokens)))
    plan = StagePlan(stage)
    plan.terms["weights"] = param_count(m) * BF16
    plan.terms["activations"] = rows * prefix_tokens * inference_bytes_per_token(m)
    plan.terms["logits"] = rows * m.vocab * READOUT_LOGIT_BYTES
    plan.note = f"{rows * prefix_tokens} tokens per forward"
    return plan


def sft_peak(m: ModelShape, rows: int, length: int, lora_r: int, targets: list[str], ckpt: bool,
             loss: str = "joint", accumulation: int = 1, chunk: int = 0) -> StagePlan:
    """SFT: `rows` examples padded to `length`, every position scored (the joint loss weighs them); the joint
    loss builds `chunk` positions of each row at a time (sft.loss_chunk_tokens; 0 = the whole row)."""
    chunk_tokens = rows * min(chunk, length) if chunk > 0 else 0
    return training_peak("sft", m, rows * length, rows * length, lora_r, targets, ckpt, loss,
                         accumulation=accumulation, chunk_tokens=chunk_tokens)


def grpo_peak(m: ModelShape, micro: int, prompt: int, completion: int, lora_r: int, targets: list[str], ckpt: bool,
              loss: str = "trl_fused_lm_head", triton: bool = True, accumulation: int = 1) -> StagePlan:
    """GRPO update: `micro` rows of prompt + completion, the completion scored. A reference pass (beta > 0) is a
    no-grad forward of the same rows before the update, smaller than the update (PEFT disables the adapter:
    no second copy of the weights)."""
    return training_peak("grpo", m, micro * (prompt + completion), micro * completion, lora_r, targets, ckpt, loss,
                         triton, accumulation)


def _get(params: dict, dotted: str, default):
    """A nested params value; the gpu-runtime keys read tolerantly (absent = the code's old behaviour)."""
    node = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _vllm_check(plan: StagePlan, m: ModelShape, gpu_gib: float, util: float, max_len: int,
                util_key: str, len_key: str) -> float:
    """vLLM's own share, and the refusal vLLM itself gives when one max-length sequence's KV does not fit."""
    share = util * gpu_gib * GIB
    ctx = max_len or m.max_positions
    kv_free = share - param_count(m) * BF16 - VLLM_RESERVE_GIB * GIB
    need = kv_bytes_per_token(m) * ctx
    if kv_free < need:
        plan.refusal = (f"vLLM's KV cache for one {ctx}-token sequence needs {need / GIB:.1f} GiB but "
                        f"{util_key}={util} leaves {max(kv_free, 0) / GIB:.1f} GiB; set {len_key} (prompt + "
                        f"completion tokens) or raise {util_key}")
    return share


def plan_readout(params: dict, m: ModelShape, gpu_gib: float, post_chain: bool) -> StagePlan:
    """Readout (prefix -> label logits at the last position only), batched by tokens. The first readout runs
    before the vLLM engine is built; the post-chain readout runs beside it when the answering backend is vllm."""
    name = "post-chain readout" if post_chain else "readout"
    budget = int(_get(params, "runtime.readout_batch_tokens", 8192))
    longest = PROMPT_TOKENS + (int(_get(params, "evaluate.answering.max_new_tokens", 0)) if post_chain else 0)
    plan = readout_peak(m, longest, max(1, budget // longest), budget, name)
    plan.knobs = {"activations": "runtime.readout_batch_tokens", "vllm share": "runtime.vllm_gpu_memory_utilization"}
    if post_chain and _get(params, "evaluate.answering.backend", "hf") == "vllm":
        plan.terms["vllm share"] = float(_get(params, "runtime.vllm_gpu_memory_utilization", 0.85)) * gpu_gib * GIB
    return plan


def plan_generation(params: dict, m: ModelShape, gpu_gib: float) -> StagePlan:
    """vLLM generation (generate / rl_probe / evaluate chains): its share of the card, checked for one
    max-length sequence's KV cache."""
    plan = StagePlan("vllm generation", knobs={"vllm share": "runtime.vllm_gpu_memory_utilization"})
    util = float(_get(params, "runtime.vllm_gpu_memory_utilization", 0.85))
    max_len = int(_get(params, "runtime.vllm_max_model_len", 0))
    plan.terms["vllm share"] = _vllm_check(plan, m, gpu_gib, util, max_len, "runtime.vllm_gpu_memory_utilization",
                                           "runtime.vllm_max_model_len")
    longest = PROMPT_TOKENS + max(int(_get(params, k, 0)) for k in
                                  ("generate.max_new_tokens", "evaluate.answering.max_new_tokens"))
    if max_len and max_len < longest and not plan.refusal:
        plan.refusal = (f"runtime.vllm_max_model_len={max_len} is shorter than a prompt ({PROMPT_TOKENS}) plus "
                        f"the longest chain ({longest - PROMPT_TOKENS}); raise runtime.vllm_max_model_len")
    plan.note = f"max_model_len {max_len or m.max_positions}"
    return plan


def plan_sft(params: dict, m: ModelShape, gpu_gib: float, triton: bool = True) -> StagePlan:
    """SFT with LoRA and the stage's joint loss: one micro-batch padded to its longest; examples over
    long_chain_tokens go alone."""
    s = params.get("sft", {})
    procs = int(_get(params, "sft.launch.num_processes", 1))
    micro = int(s.get("micro_batch_size", 0)) or max(1, int(s["batch_size"]) // procs)
    accumulation = max(1, int(s["batch_size"]) // procs // micro)
    max_len, long_chain = int(s["max_length"]), int(s.get("long_chain_tokens", 0))
    if 0 < long_chain < max_len:
        rows, length = (1, max_len) if max_len >= micro * long_chain else (micro, long_chain)
        length_key = "sft.max_length" if rows == 1 else "sft.long_chain_tokens"
    else:
        rows, length, length_key = micro, max_len, "sft.max_length"
    ckpt = bool(s.get("gradient_checkpointing", False))
    chunk = _get(params, "sft.loss_chunk_tokens", max_len)   # absent: the whole row, the old loss
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not 1 <= chunk <= max_len:
        raise PipelineError(f"sft.loss_chunk_tokens: {chunk!r} is not a whole number between 1 and sft.max_length "
                            f"({max_len}); set the positions per loss chunk (max_length = one chunk)")
    plan = sft_peak(m, rows, length, int(s["lora_r"]), list(s["lora_targets"]), ckpt, "joint", accumulation, chunk)
    # the loss head holds rows x chunk positions' logits: the chunk shrinks it at any micro-batch
    plan.knobs = {"activations": "sft.gradient_checkpointing" if not ckpt else "sft.micro_batch_size",
                  "loss head": "sft.micro_batch_size (or sft.loss_chunk_tokens)",
                  "recomputed layer": "sft.micro_batch_size"}
    if rows == 1:      # the single longest example dominates: the micro-batch does not help
        plan.knobs = {"activations": length_key if ckpt else "sft.gradient_checkpointing",
                      "loss head": "sft.loss_chunk_tokens", "recomputed layer": length_key}
    plan.note += f" (micro-batch {micro})"
    return plan


def plan_grpo(params: dict, m: ModelShape, gpu_gib: float, triton: bool = True) -> StagePlan:
    """GRPO (TRL's GRPOTrainer: fused LM-head log-probs): the trainer's model, adapters and one micro-batch of
    completions, beside colocated vLLM unless vLLM sleeps during the update (then the peak is the larger phase)."""
    r = params.get("rl", {})
    procs = int(_get(params, "rl.launch.num_processes", 1))
    step_batch = int(r["prompts_per_round"]) * int(r["num_generations"]) // max(1, int(r["steps_per_generation"]))
    micro = int(r.get("micro_batch_size", 0)) or max(1, step_batch // procs)
    accumulation = max(1, step_batch // procs // micro)
    completion = int(r["max_completion_length"])
    ckpt = bool(r.get("gradient_checkpointing", False))
    plan = grpo_peak(m, micro, PROMPT_TOKENS, completion, int(r["lora_r"]), list(r["lora_targets"]), ckpt,
                     "trl_fused_lm_head", triton, accumulation)
    plan.knobs = {"activations": "rl.gradient_checkpointing" if not ckpt else "rl.micro_batch_size",
                  "loss head": "rl.micro_batch_size", "recomputed layer": "rl.micro_batch_size"}
    plan.note += f" (micro-batch {micro})"
    if r.get("use_vllm") and r.get("vllm_mode", "colocate") == "colocate":
        util = float(r.get("vllm_gpu_memory_utilization", 0.3))       # TRL's default when the key is absent
        max_len = int(r.get("vllm_max_model_length", 0))
        share = _vllm_check(plan, m, gpu_gib, util, max_len, "rl.vllm_gpu_memory_utilization",
                            "rl.vllm_max_model_length")
        if max_len and max_len < PROMPT_TOKENS + completion and not plan.refusal:
            plan.refusal = (f"rl.vllm_max_model_length={max_len} is shorter than a prompt ({PROMPT_TOKENS}) plus "
                            f"rl.max_completion_length ({completion}); raise rl.vllm_max_model_length")
        if r.get("vllm_enable_sleep_mode", False):   # KV freed and weights offloaded during the update
            train = sum(plan.terms.values())
            gen = plan.terms["weights"] + plan.terms["lora + adamw"] + share
            plan.terms["vllm share (asleep)"] = max(0.0, gen - train)
            plan.note += "; vLLM sleeps during the update"
        else:
            plan.terms["vllm share"] = share
            plan.knobs["vllm share"] = "rl.vllm_enable_sleep_mode"
    return plan


def memory_plan(params: dict, m: ModelShape, gpu_gib: float, triton: bool = True) -> list[StagePlan]:
    """Every GPU-heavy stage of the merged params: readouts, vLLM generation, SFT, GRPO. `triton`: TRL's fused
    kernels run (a CUDA torch with triton, the normal case); False plans their torch fallback."""
    plans = [plan_readout(params, m, gpu_gib, post_chain=False), plan_readout(params, m, gpu_gib, post_chain=True)]
    backends = {_get(params, "generate.backend", "hf"), _get(params, "evaluate.answering.backend", "hf"),
                _get(params, "rl_probe.backend", "hf")}
    if "vllm" in backends:
        plans.append(plan_generation(params, m, gpu_gib))
    if "sft" in params:
        plans.append(plan_sft(params, m, gpu_gib, triton))
    if "rl" in params:
        plans.append(plan_grpo(params, m, gpu_gib, triton))
    return plans


def failures(plans: list[StagePlan], gpu_gib: float) -> list[str]:
    """One line per stage that does not fit: the stage, its need, the largest term and the knob to turn."""
    out = []
    for p in plans:
        if p.refusal:
            out.append(f"memory plan: stage {p.stage}: {p.refusal}")
        if p.peak_gib > gpu_gib:
            term = p.biggest()
            knob = p.knobs.get(term, "runtime.device")
            out.append(f"memory plan: stage {p.stage} needs {p.peak_gib:.1f} GiB of {gpu_gib:g} GiB "
                       f"({term} {p.terms[term] / GIB:.1f} GiB); change {knob}")
    return out


def render(plans: list[StagePlan], gpu_gib: float) -> str:
    """The table `make memory-plan` prints: stage, predicted peak beside the budget, the terms."""
    lines = [f"{'stage':<20} {'peak GiB':>9} {'budget':>7}  fits  terms (GiB)"]
    for p in plans:
        fits = "yes" if p.peak_gib <= gpu_gib and not p.refusal else "NO"
        terms = ", ".join(f"{k} {v / GIB:.1f}" for k, v in p.terms.items())
        lines.append(f"{p.stage:<20} {p.peak_gib:>9.1f} {gpu_gib:>7g}  {fits:<4}  {terms}, overhead "
                     f"{CUDA_OVERHEAD_GIB}  [{p.note}]")
    return "\n".join(lines)

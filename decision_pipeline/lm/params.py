"""The params sections of the small-model layer (`tokenizer`, `pretrain`, `runtime`, `<section>.launch`).

They live apart from the code that trains and loads models so that reading and checking params
(`make check`, the report, every stage's `--help`) never imports torch or transformers: seconds per
process that a stage which trains nothing should not pay (#34). The modules that use them re-export them.
"""
from __future__ import annotations

from dataclasses import dataclass

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("hf", "vllm", "openai")  # the engines decision_pipeline.lm.backends.make_backend builds


@dataclass
class LaunchParams:
    """`<section>.launch`: how many training processes and which accelerate config starts them."""
    config: str = rule(doc="accelerate config file (configs/accelerate/*.yaml: ddp, fsdp, zero2, zero3); "
                           "a dep of the stage")
    num_processes: int = rule(min=1, doc="training processes (one per GPU; on CPU gloo DDP with the threads "
                                         "split between them); the global batch stays the same")



@dataclass
class TinyModelSpec:
    """Shape of the from-config model; vocab size comes from the trained tokenizer."""
    hidden_size: int = rule(min=16, doc="model width (a multiple of num_heads)")
    num_layers: int = rule(min=1, doc="transformer blocks")
    num_heads: int = rule(min=1, doc="attention heads")
    intermediate_size: int = rule(min=16, doc="MLP width")
    max_positions: int = rule(min=32, doc="maximum sequence length (RoPE positions)")



@dataclass
class TokenizerParams:
    """The default profile's byte-level BPE (stage `tokenizer`)."""
    vocab_size: int = rule(min=300, max=65535, doc="BPE vocabulary size, special and markup tokens included")
    min_frequency: int = rule(min=1, doc="a merge must occur at least this often in the corpus")
    model_max_length: int = rule(min=64, doc="model_max_length saved with the tokenizer")



@dataclass
class RuntimeParams:
    """params.yaml `runtime`: the device models load on and the memory knobs of the engines."""
    device: str = rule(choices=DEVICES, default="auto",
                       doc="auto = cuda when torch sees a GPU, else cpu; cuda on a CPU-only torch is an error")
    readout_batch_tokens: int = rule(min=1, default=8192,
                                     doc="readout batches are packed by tokens (rows x longest padded length)")
    vllm_gpu_memory_utilization: float = rule(gt=0.0, max=1.0, default=0.85,
                                              doc="share of the GPU's memory a vLLM generation engine may take")
    vllm_max_model_len: int = rule(min=0, default=0,
                                   doc="vLLM context length (prompt + completion); 0 = the model's own")
    hf_decode: str = rule(choices=("eager", "static_cudagraphs", "static_inductor"), default="eager",
                          doc="hf backend decoding: eager, or a static KV cache with a compiled forward replayed "
                              "as CUDA graphs (static_cudagraphs: seconds to compile; static_inductor: inductor "
                              "kernels, minutes); greedy tokens equal eager's (docs/gpu.md)")



@dataclass
class PretrainParams:
    """The small GPT, its training loop and the seeds every selection is trained over (stage `pretrain`)."""
    model: TinyModelSpec = rule(doc="shape of the from-config Qwen2 model")
    seq_len: int = rule(min=16, doc="training and evaluation window in tokens")
    batch_size: int = rule(min=1, doc="windows per optimizer step")
    lr: float = rule(gt=0.0, doc="peak AdamW learning rate (cosine schedule)")
    warmup_steps: int = rule(min=0, doc="linear warmup steps (at most half the run)")
    epochs: int = rule(min=1, doc="passes over the packed budget")
    bf16: bool = rule(doc="bf16 autocast (CPU, and CUDA when there is a GPU); weights and optimizer stay fp32")
    threads: int = rule(run_control=True, min=1, doc="torch CPU threads")
    seeds: int = rule(min=1, doc="runs per selection, each with its own init seed and document order; the spread "
                                 "over them is the noise any gap between selections must beat")
    save_steps: int = rule(run_control=True, min=0, doc="checkpoint every N steps (and at the end of each seed) so a killed stage "
                                      "resumes; 0 = no checkpoints")
    launch: LaunchParams = rule(run_control=True, doc="training processes (DDP: each takes an equal share of every batch) and the "
                                    "accelerate config that starts them")
    noise: str = rule(choices=("both", "order", "init"), doc="what differs between seeds: both (init and order), "
                      "order (fixed init; document and window order) or init (fixed order); every seed, 0 included, "
                      "trains on a seeded shuffle of its selection, the same policy in every arm, so arms pair by seed")
    init_offset: int = rule(min=0, doc="added to every seed's init seed: a noise study varies the "
                            "initialisation alone with it (reporting/review/noise_study.py, source pretrain_init)")
    order_offset: int = rule(min=0, doc="added to every seed's order seed: a noise study varies the "
                             "document and window order alone with it (source pretrain_order)")

    def __post_init__(self) -> None:
        if self.batch_size % self.launch.num_processes:
            raise PipelineError(f"params.yaml: pretrain.batch_size ({self.batch_size}) must be divisible by "
                                f"pretrain.launch.num_processes ({self.launch.num_processes}): the global batch "
                                "is split evenly across the processes")

"""Language-model machinery every job shares: the tiny-model factory and its pretraining, the
tokenizer, weights and their checks, generation backends and sampling, the readout, serving, the
distributed launch, and the generic TRL/PEFT helpers (`finetune.py`: trainer defaults and the LoRA
config; `adapters.py`: adapters saved byte-identically).

May import only `common` and `questions` (the floors below it), never a job package.
"""

"""The decision model, from its base to the RL model: one sub-package per job, each with its stages.

- `base/`      the base model and its gold-trace NLL (stage base_model);
- `generate/`  reasoning chains per question, sharded and resumable (stage generate; rl_probe samples
               through it);
- `evaluate/`  how a model answers (readout, thinking, post-chain) and how well: calibration,
               evaluation, routing (stages calibrate, evaluate, cross_route; SFT's dev readout,
               rl_probe and S1MB answer through it);
- `sft/`       chain selection, the learning-rate sweep and the joint LoRA SFT (stages select_chains,
               lr_sweep, choose_lr, sft);
- `rl/`        the probe, the question selection and GRPO (stages rl_probe, rl_select, rl).

Two modules stay at this level because every job uses them: `prompts.py` (the token-id prompts of
the three ways a model answers) and `parsing.py` (the answer letter out of a completion, or why not).
Each sub-package keeps its params classes in a torch-free `config.py` (generate's stay in the
torch-free generation.py), so `make check` and `--help` import no model library.

What may import what: this package imports only `common`, `questions` and `lm` (the floors below
it); inside it, a module imports only modules on a lower floor of this order (and its own
sub-package): prompts, parsing (floor 0) < base, generate, evaluate (floor 1) < sft, rl (floor 2).
tests/pipeline/test_import_graph.py checks both.
"""

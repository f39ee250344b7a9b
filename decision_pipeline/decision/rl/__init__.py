"""Reinforcement learning of the decision model with GRPO (stages `rl_probe`, `rl_select`, `rl`),
laid out as TRL lays out a trainer:

- `config.py`: RlProbeParams, RlSelectParams, RewardParams, RLParams (torch-free);
- `probe.py`: k chains per candidate question from the SFT model (through `generate`'s machinery);
- `selection.py`: the questions that carry signal, screened and mixed;
- `rewards.py`: the reward registry (pure functions with TRL's signature);
- `trainer.py`: GRPO with TRL, the rollout log and resumable checkpoints;
- `run.py`, `metrics.py`, `analyses.py`: which questions train, and what the run reports.

May import `common`, `questions`, `lm`, decision's floor-0 modules (`prompts`, `parsing`) and the
floor-1 sub-packages (`base`, `generate`, `evaluate`: today `generate`, for the probe); never `sft`.
"""

"""Supervised fine-tuning of the decision model (stages `select_chains`, `lr_sweep`, `choose_lr`,
`sft`), laid out as TRL lays out a trainer:

- `config.py`: SelectChainsParams, LrSweepParams and the learning-rate rule, SFTParams (torch-free);
- `chains.py`: which generated chains train (loops and look-ups dropped, the shortest correct kept);
- `data.py`: the joint examples (chains + soft-target readout) and their collator;
- `loss.py`: the joint loss from the last hidden state, the LM head applied in chunks (no full logits);
- `trainer.py`: `JointSFTTrainer` (TRL's SFTTrainer with the joint loss), its config and the dev readout;
- `run.py`: one run end to end, shared by `sft` and `lr_sweep` (resume, loss log, dev readout).

May import `common`, `questions`, `lm`, decision's floor-0 modules (`prompts`, `parsing`) and the
floor-1 sub-packages (`base`, `generate`, `evaluate`: today the readout of `evaluate`); never `rl`.
"""

"""The decision model's base (stage `base_model`): pretrain@curated or a Hugging Face directory, its
think tokens, and the NLL of the solver's gold traces beside the same architecture untrained.

- `config.py`: BaseModelParams (torch-free);
- `model.py`: preparing, saving and scoring the base.

May import `common`, `questions`, `lm` and decision's floor-0 modules (`prompts`, `parsing`); no
other decision sub-package (floor 1).
"""

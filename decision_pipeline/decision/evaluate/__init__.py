"""How a model answers a question and how well (stages `calibrate`, `evaluate`, `cross_route`; SFT's
dev readout, `rl_probe` and S1MB answer through `answering.py`).

- `config.py`: AnsweringParams, CalibrateParams, EvaluateParams (torch-free);
- `answering.py`: the fast readout, thinking and the post-chain readout;
- `calibration.py`: per-task temperatures and the yes/no offset;
- `evaluation.py`: per-item records, headline metrics, routing and the paired comparison;
- `metrics.py`: the per-item table every summary is computed from;
- `decision_score.py`: the skill score over the label prior;
- `router.py`: the learned router beside margin routing;
- `cross_routing.py`: one model's readout with another's thinking.

May import `common`, `questions`, `lm` and decision's floor-0 modules (`prompts`, `parsing`); no
other decision sub-package (floor 1).
"""

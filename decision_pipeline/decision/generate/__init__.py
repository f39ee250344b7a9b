"""Chain generation (stage `generate`; `rl_probe` samples its chains through it too): k sampled
chains per question plus the teacher's, in resumable shard logs, merged into one chains.jsonl.

- `generation.py`: GenerateParams and GenerateRayParams (torch-free, beside the generator), the
  chunked, seeded generator and the teacher source;
- `sharding.py`: shard logs, worker processes (CPU processes or one GPU each) and the merge;
- `ray_generation.py`: the same chunks on a Ray cluster's actors;
- `run.py`: the `generate` stage's run (the model's chains, then the teacher's).

May import `common`, `questions`, `lm` and decision's floor-0 modules (`prompts`, `parsing`); no
other decision sub-package (floor 1).
"""

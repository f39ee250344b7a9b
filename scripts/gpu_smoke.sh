#!/usr/bin/env bash
# Device smoke (docs/gpu.md): a Qwen3-4B-shaped model with random bf16 weights through readout, SFT and
# GRPO-shaped updates at the GPU profile's sizes; prints measured peak GiB beside the memory plan's.
# Needs only a CUDA torch, transformers, peft and accelerate (no vLLM, no hub). About 2-5 minutes on one
# H100/H200 (budget: 8). `scripts/gpu_smoke.sh --tiny` runs the same code on CPU with a tiny config.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PIPELINE_QUIET="${PIPELINE_QUIET:-1}"
exec timeout "${SMOKE_TIMEOUT_S:-480}" "$PY" -m decision_pipeline.preflight.smoke "$@"

#!/usr/bin/env bash
# One-shot device measurement (#37; docs/gpu.md "Reproduce"): on a CUDA machine with torch, transformers
# and accelerate but maybe not this project's other dependencies, no network, no make, no dvc.
#   1. installs the carried wheels in gpu_wheels/ (trl 1.16.0, peft 0.21.2, datasets, dill, multiprocess,
#      ruamel.yaml) offline into /tmp/site when the interpreter is Python 3.12 (the wheels' ABI);
#   2. writes env.json (versions, GPU, whether TRL's Triton kernels run);
#   3. runs `python -m decision_pipeline gpu-check --measure`: the smoke with the real SFT/GRPO
#      trainers at the held-out rows of tests/fixtures/h200_memory.json (configurations the memory plan
#      was not fitted on: the chunked joint loss, other lengths, LoRA ranks, micro-batches, TRL's fused
#      head) beside the plan, hf decode ms/step eager vs static-cache compiled at batch 1 and 64
#      (Qwen3-4B shapes, random bf16 weights), then the real stage chain on SmolLM2-135M shapes; each
#      phase has its own time limit (240 + 120 + 80 s) and writes its JSON as rows finish, so a timeout
#      keeps what finished;
#   4. `preflight record`: the table with those held-out rows filled in, each with its provenance
#      (GPU, versions, date, commit), as h200_memory.json; copy it over tests/fixtures/ and commit it.
#      `preflight compare --measured $OUT/h200_memory.json` shows fitted and held-out rows apart.
# Output folder: $OUT (the device tool's), else the first argument, else /tmp/gpu-measure. Files: env.json,
# smoke.json, decode.json, stages.json, table.txt, gpu_check.json, h200_memory.json, compare.txt, log.txt.
# TINY=1 runs the CPU variant (no table: a CPU measures no peak).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-${1:-/tmp/gpu-measure}}"
mkdir -p "$OUT"
if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 PIPELINE_QUIET=1 TRL_EXPERIMENTAL_SILENCE=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
started=$(date +%s)
if ls gpu_wheels/*.whl >/dev/null 2>&1 && "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
  if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      gpu_wheels/*.whl >>"$OUT/log.txt" 2>&1; then
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
    echo "gpu_measure: wheels installed in /tmp/site ($(( $(date +%s) - started )) s)"
  else
    echo "gpu_measure: the carried wheels did not install (log.txt); going on with what is installed"
  fi
fi
"$PY" - >"$OUT/env.json" 2>>"$OUT/log.txt" <<'EOF'
import importlib, json, os, platform, subprocess, sys
import torch
info = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
        "torch": torch.__version__, "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    info.update(gpu=p.name, gpu_gib=round(p.total_memory / 1024 ** 3, 1))
for name in ("transformers", "trl", "peft", "accelerate", "datasets", "triton", "tokenizers", "numpy", "pyarrow",
             "pandas", "scipy", "matplotlib", "ruamel.yaml"):
    try:
        mod = importlib.import_module(name)
        info[name] = getattr(mod, "__version__", "?")
    except Exception as exc:
        info[name] = f"missing: {type(exc).__name__}: {exc}"[:200]
try:
    from trl.kernels.chunked_logprob import _use_triton
    info["trl_fused_logprob_path"] = "triton" if _use_triton(torch.device("cuda")) else "torch"
except Exception as exc:
    info["trl_fused_logprob_path"] = f"unknown: {exc}"[:200]
try:
    info["nvidia_smi"] = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout.strip()
except Exception as exc:
    info["nvidia_smi"] = f"unavailable: {exc}"
print(json.dumps(info, indent=1))
EOF
cat "$OUT/env.json"
"$PY" -m decision_pipeline gpu-check --measure --out "$OUT" ${TINY:+--tiny}
rc=$?
if [ -z "${TINY:-}" ] && [ -s "$OUT/smoke.json" ]; then
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo "${COMMIT:-?}")
  "$PY" -m decision_pipeline preflight record --smoke "$OUT/smoke.json" --env "$OUT/env.json" --commit "$commit" \
    --out "$OUT/h200_memory.json" 2>&1 | tee -a "$OUT/log.txt"
  "$PY" -m decision_pipeline preflight compare --measured "$OUT/h200_memory.json" >"$OUT/compare.txt" 2>&1
  cat "$OUT/compare.txt"
fi
echo "gpu_measure: exit $rc after $(( $(date +%s) - started )) s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $rc

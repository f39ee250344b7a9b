"""Do two machines compute the same bytes? 20 AdamW steps of the default tiny Qwen2 shape on CPU.

Prints the CPU kernel set in use, the final loss to 8 decimals and a SHA-256 of the weights. Run it
on two machines (e.g. this one and any other x86 box): with the library's AVX2 pin
(decision_pipeline/common/cpu.py) the losses agree; the weights' last bits may not (two AVX-512 machines
gave two hashes), so the pipeline's own outputs are the full check; `PIPELINE_CPU_KERNELS=native` shows
what the CPU's own kernels give. Numbers measured so far are in docs/reliability.md.

    python perf/cpu_determinism.py [--json OUT]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import platform

import decision_pipeline.common  # noqa: F401  (pins the CPU kernels before the first operation)
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM


def run(steps: int = 20) -> dict:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=4096, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=4, intermediate_size=512, max_position_embeddings=1024)
    model = Qwen2ForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x = torch.randint(0, 4096, (16, 128), generator=torch.Generator().manual_seed(1))
    for _ in range(steps):
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    return {"capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "machine": platform.processor() or platform.machine(), "loss": f"{loss.item():.8f}",
            "weights_sha256": digest[:16], "steps": steps}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()
    result = run()
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)

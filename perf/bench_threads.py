"""Why the suite runs PyTorch on one thread per process: a training step alone and beside a twin.

`make test` runs two pytest workers on a 2-core machine, and each worker (and every stage a test
starts) ran PyTorch's kernels on the section's `threads: 2`. Two processes that each want two threads
on two cores spin on each other's barriers. This times a training step of the micro profile's model
(1 layer, hidden 32, vocabulary 1,200, batch 8 x 64 tokens) in four settings, each in fresh processes:
one process at 1 and at 2 threads, and two processes side by side at 1 thread each and at 2 each.

    python perf/bench_threads.py [--steps 40] [--json metrics/perf/threads.json]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from decision_pipeline.common.io import write_json

CHILD = r"""
import sys, time, torch
from transformers import Qwen2Config, Qwen2ForCausalLM
threads, steps = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
torch.set_num_threads(threads)
cfg = Qwen2Config(vocab_size=1200, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, intermediate_size=64, max_position_embeddings=1024)
model = Qwen2ForCausalLM(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randint(0, 1200, (8, 64))
def step():
    opt.zero_grad(); model(x, labels=x).loss.backward(); opt.step()
for _ in range(5):
    step()
print("ready", flush=True)
sys.stdin.readline()                       # both twins start timing together
t = time.perf_counter()
for _ in range(steps):
    step()
print((time.perf_counter() - t) / steps * 1000, flush=True)
"""


def run(threads: int, copies: int, steps: int) -> list[float]:
    """Per-step milliseconds of each of `copies` processes started together at `threads` threads."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(threads), str(steps)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(copies)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    out = [float(p.stdout.readline()) for p in procs]
    for p in procs:
        p.wait()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each setting; the median is reported")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    rows = {}
    for copies in (1, 2):
        for threads in (1, 2):
            ms = [max(run(threads, copies, a.steps)) for _ in range(a.repeats)]   # the slower twin
            key = f"{copies}x{threads}"
            rows[key] = {"processes": copies, "threads_each": threads, "step_ms_median": round(statistics.median(ms), 2),
                         "step_ms_runs": [round(v, 2) for v in ms]}
            print(f"{copies} process(es) x {threads} thread(s): {statistics.median(ms):7.2f} ms a step "
                  f"(slowest process; runs {', '.join(f'{v:.1f}' for v in ms)})", flush=True)
    base = rows["1x1"]["step_ms_median"]
    for r in rows.values():
        r["ratio_to_one_process_one_thread"] = round(r["step_ms_median"] / base, 2)
    result = {"machine_dependent": True, "date": time.strftime("%Y-%m-%d"), "cpus": len(os.sched_getaffinity(0)),
              "steps": a.steps, "repeats": a.repeats, "settings": rows}
    if a.json:
        write_json(a.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Expected first-run hours per GPU stage: the plan's token counts over measured throughputs.

Why measured: assumed rates were off by 2x where a GPU checked them (readout 23-35k tok/s, not 50k;
hf decode 13-784 tok/s and flat in batch size, not 1,500). Rates come from the measured table
(tests/fixtures/h200_memory.json, `throughput`, with its provenance: one H200, 2026-12-04); each row
prints where its rate is from. SFT's rate is read at the stage's tokens per forward (nearest measured
length), hf decoding at the stage's batch size (linear between measured batch sizes, ms per step),
GRPO's update and the readout at the slower end of their measured range; hf decoding at the profile's
`runtime.hf_decode` mode where that mode was measured, else eager's figures. vLLM has not run on a GPU
for this project: its rate is the table's `assumed` entry and is printed as an assumption.
"""
from __future__ import annotations

from pathlib import Path

from decision_pipeline.preflight.measured import H200, load
from decision_pipeline.preflight.plan import PROMPT_TOKENS, _get

MEAN_CHAIN_TOKENS = 2000       # assumed mean sampled chain (capped chains are longer, most are shorter)


class Rates:
    """The measured (and assumed) throughputs of one table, each with the words that say where it is from."""

    def __init__(self, data: dict, decode_mode: str = "eager"):
        t, a = data.get("throughput", {}), data.get("assumed", {})
        p = data["provenance"]
        self.where = f"{p.get('machine', '?')}, {p.get('date', '?')}, {p.get('commit', '?')}"
        self.sft = {int(k): float(v) for k, v in t["sft_tokens_per_s"]["by_tokens_per_forward"].items()}
        self.grpo = float(t["grpo_update_tokens_per_s"]["low"])
        self.readout = float(t["readout_tokens_per_s"]["low"])
        decode = t["hf_decode_ms_per_step"]
        # the profile's runtime.hf_decode when it was measured, else eager's figures (said in the row)
        self.decode_mode = decode_mode if decode_mode in decode else "eager"
        self.decode = {int(k): float(v) for k, v in decode[self.decode_mode].items()}
        self.vllm = float(a["vllm_tokens_per_s"]["value"])

    def sft_rate(self, tokens_per_forward: int) -> tuple[float, str]:
        near = min(self.sft, key=lambda n: abs(n - tokens_per_forward))
        return self.sft[near], f"measured at {near:,} tok/forward"

    def hf_rate(self, batch: int) -> tuple[float, str]:
        """Decode tokens per second at `batch` rows: batch x 1000 / ms per step (ms linear between batches)."""
        sizes = sorted(self.decode)
        b = min(max(batch, sizes[0]), sizes[-1])
        lo = max(s for s in sizes if s <= b)
        hi = min(s for s in sizes if s >= b)
        ms = self.decode[lo] if hi == lo else self.decode[lo] + (self.decode[hi] - self.decode[lo]) * (b - lo) / (hi - lo)
        return batch * 1000.0 / ms, f"measured hf decode ({self.decode_mode}), batch {batch}"

    def gen_rate(self, backend: str, batch: int) -> tuple[float, str]:
        return (self.vllm, "ASSUMED (vLLM not measured)") if backend == "vllm" else self.hf_rate(batch)


def stage_tokens(params: dict, rates: Rates | None = None) -> list[tuple[str, int, float, str, str]]:
    """(stage, tokens, tokens per second, where the rate is from, what is counted) per GPU-heavy stage."""
    rates = rates or Rates(load(H200), _get(params, "runtime.hf_decode", "eager"))
    chain = PROMPT_TOKENS + MEAN_CHAIN_TOKENS
    g = params.get("generate", {})
    ev = params.get("evaluate", {})
    answer_backend = _get(params, "evaluate.answering.backend", "hf")
    answer_batch = int(_get(params, "evaluate.answering.batch_size", 16))
    rows = [("generate", int(g.get("max_questions", 0)) * int(g.get("k", 0)) * chain,
             *rates.gen_rate(g.get("backend", "hf"), int(g.get("batch_size", 16))), "questions x k chains")]
    items = int(ev.get("max_items", 0))
    rows.append(("evaluate (readout)", items * PROMPT_TOKENS, rates.readout, "measured readout (slower end)",
                 "eval prompts"))
    rows.append(("evaluate (chains)", items * chain, *rates.gen_rate(answer_backend, answer_batch),
                 "one chain per eval item (x models evaluated)"))
    s = params.get("sft", {})
    micro = int(s.get("micro_batch_size", 0)) or int(s.get("batch_size", 1))
    sft_rate, sft_where = rates.sft_rate(micro * chain)
    sweep = params.get("lr_sweep", {})
    if s.get("lr_source") == "sweep":
        rows.append(("lr_sweep", len(sweep.get("lrs", [])) * int(sweep.get("max_steps", 0)) * int(s.get("batch_size", 0))
                     * chain, sft_rate, sft_where, "lrs x steps x batch examples"))
    rows.append(("sft", int(s.get("max_steps", 0)) * int(s.get("batch_size", 0)) * chain, sft_rate, sft_where,
                 "steps x batch examples"))
    p = params.get("rl_probe", {})
    rows.append(("rl_probe", (int(p.get("fresh_questions", 0)) + int(p.get("sft_questions", 0))) * int(p.get("k", 0))
                 * chain, *rates.gen_rate(p.get("backend", "hf"), int(p.get("batch_size", 16))), "questions x k chains"))
    r = params.get("rl", {})
    rounds = int(r.get("max_steps", 0)) // max(1, int(r.get("steps_per_generation", 1)))
    group = int(r.get("prompts_per_round", 0)) * int(r.get("num_generations", 0))
    rl_tokens = rounds * group * chain
    rows.append(("rl (rollouts)", rl_tokens, *rates.gen_rate("vllm" if r.get("use_vllm") else "hf", max(1, group)),
                 "rounds x prompts x group"))
    rows.append(("rl (updates)", rl_tokens, rates.grpo, "measured GRPO update (slower end)",
                 "the same tokens, trained once"))
    s1_backend = _get(params, "s1mb.backend", answer_backend)
    rows.append(("s1mb", int(_get(params, "s1mb_data.max_cases", 0)) * 40 * chain,
                 *rates.gen_rate(s1_backend, int(_get(params, "s1mb.batch_size", 16))),
                 "cases x ~40 decisions, routed share thinks"))
    return rows


def render_hours(params: dict, measured: str | Path | None = None) -> str:
    """The `hours` table: tokens per stage, the rate and where it is from, hours; the sources under it."""
    rates = Rates(load(measured or H200), _get(params, "runtime.hf_decode", "eager"))
    lines = [f"{'stage':<20} {'tokens':>14} {'tok/s':>8} {'hours':>7}  {'rate from':<40} counted"]
    total = 0.0
    for stage, tokens, rate, where, what in stage_tokens(params, rates):
        hours = tokens / rate / 3600
        total += hours
        lines.append(f"{stage:<20} {tokens:>14,} {rate:>8,.0f} {hours:>7.1f}  {where:<40} {what}")
    lines.append(f"{'total':<20} {'':>14} {'':>8} {total:>7.1f}")
    lines.append(f"measured on {rates.where} (tests/fixtures/h200_memory.json); assumed: mean chain "
                 f"{MEAN_CHAIN_TOKENS} tokens + prompt {PROMPT_TOKENS}, vLLM {rates.vllm:,.0f} tok/s (an assumption "
                 "until vLLM is measured)")
    return "\n".join(lines)

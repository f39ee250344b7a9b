"""Stage `rl`: GRPO (TRL) on the SFT model with a fresh LoRA adapter; adapter and merged model.

Takes the first `rl.max_steps / rl.steps_per_generation × rl.prompts_per_round`
questions of `rl_select` (each used in exactly one round; a selection that falls
short trains the whole rounds it fills, `decision/rl/run.py` fit_rounds), rewards from the
registry in `decision_pipeline/decision/rl/rewards.py` weighted by
`rl.rewards`, every GRPO knob set from params. Checkpoints every
`rl.save_steps` into a work directory outside DVC's outputs; a killed run resumes
from the last checkpoint of the same params, data, SFT model and code (another
run's checkpoints are refused, and the reason printed). Writes the rollout log
beside the checkpoints, per-round rows (`plots/rl/rounds.json` + PNG) and
`metrics/rl.json` (reward gain with a bootstrap CI over prompts, the reward trend adjusted
for each prompt's probe pass rate, answer collapse per round and over the last quarter, the gold
positions before and after `rl.gold_positions` arranged the options). `rl.launch`
picks the process count and accelerate config: one process trains here; more
re-run this command under `accelerate launch`, and rank 0 alone writes the outputs.
"""
from __future__ import annotations

import time

from decision_pipeline.common.fingerprint import code_fingerprint, model_fingerprint
from decision_pipeline.common.io import atomic_dir, read_jsonl, write_json, write_timings
from decision_pipeline.common.log import info, stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.decision.rl.config import RLParams
from decision_pipeline.lm.params import LaunchParams, RuntimeParams
from decision_pipeline.questions.schema import load_items


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (RLParams, "rl"), (LaunchParams, "rl.launch"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--model", required=True, help="the SFT model directory (merged)")
    ap.add_argument("--items", required=True)
    ap.add_argument("--selected", required=True, help="rl_select's questions.jsonl (training order)")
    ap.add_argument("--probe", required=True, help="rl_probe's probe.jsonl (pass rate per question: the difficulty)")
    ap.add_argument("--work", required=True, help="persistent checkpoint directory")
    ap.add_argument("--out", required=True, help="merged model directory (adapter in <out>/adapter)")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--plots", required=True, help="directory for rounds.json and rounds.png")
    ap.add_argument("--timings", required=True, help="machine-dependent wall times (a cached output, not a metric)")
    ap.add_argument("--live", help="DVCLive directory for the per-step training metrics (its own directory: a rerun empties it)")
    args = ap.parse_args(argv)
    # the model libraries only after the arguments parsed: `--help` and a wrong flag answer in under a
    # second instead of paying ~6 s of torch, transformers and peft imports
    import torch
    from decision_pipeline.decision.rl import rewards as rl_rewards, trainer as rl_trainer
    from decision_pipeline.lm.adapters import save_adapter_and_merged
    from decision_pipeline.decision.rl.run import arrange_gold_positions, fit_rounds, run_metrics, training_questions
    from decision_pipeline.decision.rl.trainer import check_lora_targets, fingerprint_parts, train_grpo
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.launch import finish, threads_per_process, train_here
    from decision_pipeline.lm.model import load_model
    from decision_pipeline.reporting.stage_figures import plot_rl_rounds
    started = time.time()
    p = load_section(RLParams, "rl", args.params)
    seed = load_base(args.params).seed + p.seed_offset
    selected = read_jsonl(args.selected)
    planned, p = p.rounds, fit_rounds(p, len(selected), args.selected)
    if p.rounds < planned:
        info("rl", f"{len(selected)} questions selected fill {p.rounds} of the {planned} planned rounds: "
                   f"training {p.rounds} (rl.max_steps {p.max_steps})")
    chosen = training_questions(selected, {q["id"]: q for q in load_items(args.items)}, p, args.selected)
    questions = arrange_gold_positions(chosen, p.gold_positions)
    if not train_here(p.launch, "rl", "stages.rl", argv, args.params):
        return  # the launched processes trained; rank 0 wrote the outputs and the summary line
    torch.set_num_threads(threads_per_process(p.threads))
    device = load_section(RuntimeParams, "runtime", args.params).device
    model, tok = load_model(args.model, device=device), load_tokenizer(args.model)
    check_lora_targets(model, p.lora_targets, args.model)
    fingerprint = fingerprint_parts(p, seed, questions, model_fingerprint(args.model),
                                    code_fingerprint(rl_trainer, rl_rewards))
    train_started = time.time()
    peft_model, history, resumed_from = train_grpo(model, tok, questions, p, seed, args.work, fingerprint,
                                                   live_dir=args.live)
    train_seconds = time.time() - train_started
    finish()
    if peft_model is None:
        return  # not rank 0: only rank 0 writes
    rollouts = read_jsonl(f"{args.work}/rollouts.jsonl")
    metrics, rounds = run_metrics(rollouts, history, p, seed, selected, questions, read_jsonl(args.probe), chosen)
    merged = peft_model.merge_and_unload()
    with atomic_dir(args.out) as tmp:
        save_adapter_and_merged(peft_model, merged, tok, tmp)
    write_json(f"{args.plots}/rounds.json", rounds)
    plot_rl_rounds(rounds, f"{args.plots}/rounds.png", f"GRPO on the SFT model: {p.rounds} rounds x "
                                                      f"{p.prompts_per_round} prompts x {p.num_generations} chains")
    write_json(args.metrics, metrics)
    write_timings(args.timings, started, {"resumed_from_step": resumed_from,
                                          "train_seconds_this_run": round(train_seconds, 1),
                                          "completions_per_second": round(metrics["completions"] / max(train_seconds, 1e-9), 2)
                                          if resumed_from == 0 else None})
    gain = metrics["reward_gain"]
    summary("rl", started, rounds=p.rounds, reward_first=gain["first_quarter"], reward_last=gain["last_quarter"],
            gain_ci=f"[{gain['ci_low']}, {gain['ci_high']}]", unfinished_last=rounds[-1]["unfinished_share"],
            resumed_from=resumed_from)


if __name__ == "__main__":
    raise SystemExit(main())

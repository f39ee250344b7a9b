"""Kill -9 at seeded random progress points, rerun, and compare with an uninterrupted run.

Why: "resumable" is a claim about what is on disk at the moment of an unplanned
kill (OOM killer, pre-empted node, Ctrl-\\), not about the happy path. Each test
runs a stage's real `main(argv)` (forked from `stage_forker.py`, so the torch
stack is imported once) on a tiny locally built model, SIGKILLs it at three
points drawn from a seeded RNG over the run's progress markers (one early, one
middle, one late), checks after every kill that no output path holds a partial
file, then lets a rerun finish and compares it with an uninterrupted run:

- generate: markers = chain records in the shard logs; every record on disk after
  a kill equals the uninterrupted run's, and the final `chains.jsonl` is
  byte-identical;
- sft: markers = completed checkpoints; the final adapter and merged weights are
  bitwise identical on CPU with the fixed seed, and so is the loss log;
- rl (the library run of tests/decision/test_rl.py): markers = rollout rows; the
  adapter digest and `rollouts.jsonl` are identical;
- pretrain: markers = the seed-0 checkpoint's step; the
  stage checkpoints every `pretrain.save_steps` into its work directory, the rerun
  resumes from the last checkpoint and its weights and loss log are byte-identical.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Callable

import pytest
import yaml

from decision_pipeline.common.io import read_jsonl, write_json, write_jsonl, write_table
from decision_pipeline.common.params import from_dict
from decision_pipeline.curation.documents import DEV_SCHEMA, POOL_SCHEMA
from decision_pipeline.questions.splits import ItemsParams, build_items
from decision_pipeline.questions.schema import QUESTION_SCHEMA

from tests.pipeline.kill_helpers import Forker, complete_lines, gone, jsonl_lines, kill_points, spawned_children
from decision_pipeline.common.profiles import merged_profile

ROOT = Path(__file__).resolve().parents[2]
MICRO = merged_profile("micro", ROOT)
SEED = 154  # issue 15.4: the kill points are this RNG's, not hand-picked
KILLED = -9
PRELOAD = ["stages.generate", "stages.sft", "stages.pretrain", "decision_pipeline.decision.rl.trainer",
           "tests.decision.rl_helpers"]

pytestmark = pytest.mark.slow


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def forker(tmp_path_factory):
    f = Forker(PRELOAD, tmp_path_factory.mktemp("forker"))
    yield f
    f.close()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tiny_dir) -> dict:
    """Items, chains, a pool and the params every run here reads (never written by a run)."""
    root = tmp_path_factory.mktemp("kill_inputs")
    rows, _ = build_items(from_dict(ItemsParams, MICRO["items"], "items"), MICRO["base"]["seed"])
    write_table(root / "items.parquet", rows, QUESTION_SCHEMA)
    from decision_pipeline.decision.generate.generation import solver_record
    from decision_pipeline.questions.schema import load_items
    from decision_pipeline.lm.bpe import load_tokenizer
    tok = load_tokenizer(tiny_dir)
    chains = [solver_record(q, tok) for q in load_items(root / "items.parquet", split="pool")]
    write_jsonl(root / "kept.jsonl", chains)
    write_json(root / "chosen.json", {"chosen_lr": 0.003})
    docs = [{"id": f"d{i}", "text": " ".join(f"word{(i * 7 + j) % 50} is {j}." for j in range(40)),
             "safety_score": 0, "meta_json": "{}"} for i in range(200)]
    write_table(root / "pool.parquet", docs, POOL_SCHEMA)
    write_table(root / "dev.parquet", [{"id": f"v{i}", "text": docs[i]["text"], "register": "news"} for i in range(4)],
                DEV_SCHEMA)
    (root / "selection").mkdir()
    write_json(root / "selection" / "selection.json", {"ids": [d["id"] for d in docs]})
    params = json.loads(json.dumps(MICRO))
    params["generate"].update(max_questions=24, k=2, max_new_tokens=24, chunk=2, batch_size=4, threads=1, workers=1)
    params["sft"].update(lr_source="sweep", max_steps=12, save_steps=2, threads=1, dev_items=4)
    # one training run per stage run (the section gains `seeds` in a concurrent change; set what exists)
    params["pretrain"].update(threads=1, seeds=1, save_steps=4)
    params["curate"]["budget_tokens"] = 30000
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return {"root": root, "params": str(root / "params.yaml"), "model": tiny_dir, "items": str(root / "items.parquet"),
            "kept": str(root / "kept.jsonl")}


def _sft_args(inputs: dict, run: Path) -> list:
    r = inputs["root"]
    return [["--params", inputs["params"], "--base", inputs["model"], "--items", inputs["items"], "--kept",
             inputs["kept"], "--chains", inputs["kept"], "--chosen", str(r / "chosen.json"), "--work", str(run / "work"),
             "--out", str(run / "sft"), "--metrics", str(run / "sft.json"), "--plots", str(run / "plots"),
             "--timings", str(run / "timings.json")]]



def _assert_absent_or_equal(path: Path, reference: Path) -> None:
    """A downstream reader finds nothing, or the whole file an uninterrupted run writes."""
    assert not path.exists() or path.read_bytes() == reference.read_bytes(), f"{path} is partial"


# ------------------------------------------------------------------ generate

def _generate_args(inputs: dict, run: Path, params: str | None = None) -> list:
    return [["--params", params or inputs["params"], "--model", inputs["model"], "--items", inputs["items"],
             "--out", str(run / "generate"), "--metrics", str(run / "generate.json"),
             "--timings", str(run / "timings.json")]]


def _reference_run(forker, tmp_path_factory, name: str, call: str, args: Callable[[Path], list]) -> Path:
    """An uninterrupted run of `call` (a stage's `main`) in a fresh directory: what every kill is compared with."""
    run = tmp_path_factory.mktemp(name)
    rc, log = forker.run(call, args(run), run / "log")
    assert rc == 0, log
    return run


@pytest.fixture(scope="module")
def generate_reference(forker, inputs, tmp_path_factory) -> Path:
    return _reference_run(forker, tmp_path_factory, "generate_ref", "stages.generate:main",
                          lambda run: _generate_args(inputs, run))


def _shards(run: Path) -> list[Path]:
    return sorted((run / "generate" / "shards").glob("*.jsonl"))


def _check_killed_generate(run: Path, reference: Path) -> int:
    """After a kill: no merged log or metrics, and every whole record on disk is the uninterrupted run's."""
    _assert_absent_or_equal(run / "generate" / "chains.jsonl", reference / "generate" / "chains.jsonl")
    assert not (run / "generate.json").exists()
    expected = {r["id"]: r for r in read_jsonl(reference / "generate" / "chains.jsonl")}
    on_disk = [r for path in _shards(run) for r in complete_lines(path)]
    assert on_disk and all(r == expected[r["id"]] for r in on_disk)
    assert len({r["id"] for r in on_disk}) == len(on_disk)  # nothing written twice across resumes
    return len(on_disk)


def test_generate_killed_at_three_points_resumes_byte_identical(forker, inputs, generate_reference, tmp_path):
    base = [r for r in read_jsonl(generate_reference / "generate" / "chains.jsonl") if r["source"] == "base"]
    g = yaml.safe_load(Path(inputs["params"]).read_text())["generate"]
    # kill only while base chunks remain to be sampled, so the run cannot end before the kill lands
    points = kill_points(SEED, len(base) - g["chunk"] * g["k"])
    run, kept = tmp_path / "run", 0
    for i, point in enumerate(points):
        rc = forker.run_until("stages.generate:main", _generate_args(inputs, run), tmp_path / f"kill{i}.log",
                              lambda: jsonl_lines(_shards(run)) >= point)
        assert rc == KILLED, (tmp_path / f"kill{i}.log").read_text()
        now = _check_killed_generate(run, generate_reference)
        assert now >= max(point - 1, kept)  # a kill mid-line loses at most the torn record
        kept = now
        print(f"\ngenerate: kill {i + 1} at >= {point} of {len(base)} base records: {now} whole records on disk")
    rc, log = forker.run("stages.generate:main", _generate_args(inputs, run), tmp_path / "final.log")
    assert rc == 0, log
    assert (run / "generate" / "chains.jsonl").read_bytes() == (generate_reference / "generate" / "chains.jsonl").read_bytes()
    assert json.loads((run / "timings.json").read_text())["resumed_records"] == kept  # run history, not a metric
    assert "resumed_records" not in json.loads((run / "generate.json").read_text())
    assert not (run / "generate" / "shards").exists()


def test_generate_with_two_workers_killed_then_resumed_with_one_is_byte_identical(forker, inputs, generate_reference,
                                                                                 tmp_path):
    """kill -9 of the stage while 2 workers sample: the workers die with it (PR_SET_PDEATHSIG), their shard
    logs hold only the uninterrupted run's records, and a rerun with *1* worker finishes the same file."""
    params = yaml.safe_load(Path(inputs["params"]).read_text())
    params["generate"]["workers"] = 2
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump(params, sort_keys=False))
    base = sum(r["source"] == "base" for r in read_jsonl(generate_reference / "generate" / "chains.jsonl"))
    point = kill_points(SEED + 1, base // 2, n=1)[0]  # inside the first half: both workers still busy
    run, workers = tmp_path / "run", []
    rc = forker.run_until("stages.generate:main", _generate_args(inputs, run, str(two)), tmp_path / "kill.log",
                          lambda: jsonl_lines(_shards(run)) >= point, timeout=300,
                          before_kill=lambda pid: workers.extend(spawned_children(pid)))
    assert rc == KILLED, (tmp_path / "kill.log").read_text()
    assert len(workers) == 2 and gone(workers, wait=5.0), f"shard workers {workers} outlived the killed stage by 5 s"
    assert {p.name for p in _shards(run)} <= {"base.0-of-2.jsonl", "base.1-of-2.jsonl"}
    on_disk = _check_killed_generate(run, generate_reference)
    print(f"\ngenerate, 2 workers: killed at >= {point} of {base} base records: {on_disk} whole records on disk")
    rc, log = forker.run("stages.generate:main", _generate_args(inputs, run), tmp_path / "final.log")  # workers: 1
    assert rc == 0, log
    assert (run / "generate" / "chains.jsonl").read_bytes() == (generate_reference / "generate" / "chains.jsonl").read_bytes()


# ------------------------------------------------------------------ sft

SFT_OUTPUTS = ("sft", "sft.json", "plots")  # model dir (adapter inside), metrics, loss plot data


def _sft_args(inputs: dict, run: Path) -> list:
    r = inputs["root"]
    return [["--params", inputs["params"], "--base", inputs["model"], "--items", inputs["items"], "--kept",
             inputs["kept"], "--chains", inputs["kept"], "--chosen", str(r / "chosen.json"), "--work", str(run / "work"),
             "--out", str(run / "sft"), "--metrics", str(run / "sft.json"), "--plots", str(run / "plots"),
             "--timings", str(run / "timings.json")]]


@pytest.fixture(scope="module")
def sft_reference(forker, inputs, tmp_path_factory) -> Path:
    return _reference_run(forker, tmp_path_factory, "sft_ref", "stages.sft:main", lambda run: _sft_args(inputs, run))


def _sft_checkpoints(inputs: dict) -> list[int]:
    s = yaml.safe_load(Path(inputs["params"]).read_text())["sft"]
    return list(range(s["save_steps"], s["max_steps"], s["save_steps"]))  # the last step is the end, not a marker


def _complete(run: Path, step: int) -> bool:
    """The stage seals a checkpoint (its loss log, then a `complete` marker) after the trainer saved it."""
    return (run / "work" / f"checkpoint-{step}" / "complete").is_file()


def _kill_sft_after(forker, inputs: dict, run: Path, step: int, log: Path) -> None:
    rc = forker.run_until("stages.sft:main", _sft_args(inputs, run), log, lambda: _complete(run, step))
    assert rc == KILLED, log.read_text()
    for out in SFT_OUTPUTS:  # training was still going: no output may exist yet
        assert not (run / out).exists(), out


def _weights(run: Path) -> list[str]:
    return [_sha(run / "sft" / "adapter" / "adapter_model.safetensors"), _sha(run / "sft" / "model.safetensors")]


def test_sft_killed_at_three_checkpoints_resumes_to_identical_weights(forker, inputs, sft_reference, tmp_path):
    markers = _sft_checkpoints(inputs)
    steps = [markers[i - 1] for i in kill_points(SEED, len(markers))]
    assert len(set(steps)) == 3
    run = tmp_path / "run"
    for i, step in enumerate(steps):
        _kill_sft_after(forker, inputs, run, step, tmp_path / f"kill{i}.log")
    print(f"\nsft: killed after checkpoints {steps} of {markers} (max_steps {markers[-1] + markers[0]})")
    rc, log = forker.run("stages.sft:main", _sft_args(inputs, run), tmp_path / "final.log")
    assert rc == 0, log
    assert _weights(run) == _weights(sft_reference)  # bitwise: CPU, fixed seed, RNG state restored
    ref, got = (json.loads((r / "sft.json").read_text()) for r in (sft_reference, run))
    # `train_loss` comes from the whole sealed loss log (the trainer's own averages only its last invocation)
    assert got["dev"] == ref["dev"] and got["final"] == ref["final"] and got["train_loss"] == ref["train_loss"]


def test_sft_rerun_after_the_last_checkpoint_trains_nothing(forker, inputs, sft_reference, tmp_path):
    """A rerun whose work directory already holds the final checkpoint (a lost output, a `dvc repro -f`)
    loads it: the trainer resumed there ran one more training step (step 13 of 12 in the loss log)."""
    run = tmp_path / "run"
    shutil.copytree(sft_reference / "work", run / "work")
    rc, log = forker.run("stages.sft:main", _sft_args(inputs, run), tmp_path / "again.log")
    assert rc == 0, log
    assert _weights(run) == _weights(sft_reference)
    for rel in ("sft/adapter/adapter_config.json", "sft.json", "plots/loss_parts.json"):
        assert (run / rel).read_bytes() == (sft_reference / rel).read_bytes(), rel


def test_sft_loss_log_survives_a_kill_between_checkpoint_and_loss_log(forker, inputs, sft_reference, tmp_path):
    step = _sft_checkpoints(inputs)[1]
    run = tmp_path / "run"
    _kill_sft_after(forker, inputs, run, step, tmp_path / "kill.log")
    # the window between the trainer's save and the seal is too narrow to hit every time: unseal the
    # checkpoint, which is exactly the state a kill inside that window leaves
    (run / "work" / f"checkpoint-{step}" / "complete").unlink()
    rc, log = forker.run("stages.sft:main", _sft_args(inputs, run), tmp_path / "final.log")
    assert rc == 0, log
    assert _weights(run) == _weights(sft_reference)
    assert (run / "plots" / "loss_parts.json").read_bytes() == (sft_reference / "plots" / "loss_parts.json").read_bytes()


def test_sft_resumes_after_a_kill_in_the_middle_of_a_checkpoint_save(forker, inputs, sft_reference, tmp_path):
    first, second = _sft_checkpoints(inputs)[:2]
    run = tmp_path / "run"
    rc = forker.run_until("stages.sft:main", _sft_args(inputs, run), tmp_path / "kill.log",
                          lambda: (run / "work" / f"checkpoint-{second}").exists())
    assert rc == KILLED
    partial = run / "work" / f"checkpoint-{second}"
    (partial / "trainer_state.json").unlink(missing_ok=True)  # the trainer writes it last: now surely mid-save
    assert _complete(run, first) or not (run / "work" / f"checkpoint-{first}").exists()
    rc, log = forker.run("stages.sft:main", _sft_args(inputs, run), tmp_path / "final.log")
    assert rc == 0, log[-1500:]
    assert _weights(run) == _weights(sft_reference)


# ------------------------------------------------------------------ rl (the library run of tests/decision/test_rl.py)

RL_STEPS = 6


def _rl_result(log: Path) -> dict:
    return json.loads(log.read_text().strip().splitlines()[-1])


def test_rl_killed_at_three_rollout_points_resumes_to_the_same_adapter(forker, toy_model_dir, tmp_path):
    from tests.decision import rl_helpers  # the module the forker preloads (PRELOAD)
    ref = tmp_path / "ref"
    rc, _ = forker.run("tests.decision.rl_helpers:run", [toy_model_dir, str(ref), RL_STEPS], tmp_path / "ref.log")
    assert rc == 0, (tmp_path / "ref.log").read_text()[-2000:]
    straight = _rl_result(tmp_path / "ref.log")
    reference = (ref / "rollouts.jsonl").read_bytes()
    per_round = rl_helpers.ROUND_PROMPTS * rl_helpers.GENERATIONS
    run = tmp_path / "run"
    for i, point in enumerate(kill_points(SEED, reference.count(b"\n") - per_round)):
        log = tmp_path / f"kill{i}.log"
        rc = forker.run_until("tests.decision.rl_helpers:run", [toy_model_dir, str(run), RL_STEPS], log,
                              lambda: jsonl_lines([run / "rollouts.jsonl"]) >= point)
        assert rc == KILLED, log.read_text()[-2000:]
        data = (run / "rollouts.jsonl").read_bytes()
        assert reference.startswith(data[: data.rfind(b"\n") + 1])  # every whole row is the uninterrupted run's
        rows, total = data.count(b"\n"), reference.count(b"\n")
        print(f"\nrl: kill {i + 1} at >= {point} of {total} rollout rows: {rows} on disk, "
              f"checkpoints {sorted(p.name for p in run.glob('checkpoint-*'))}")
    rc, _ = forker.run("tests.decision.rl_helpers:run", [toy_model_dir, str(run), RL_STEPS], tmp_path / "final.log")
    assert rc == 0, (tmp_path / "final.log").read_text()[-2000:]
    again = _rl_result(tmp_path / "final.log")
    assert again["start"] > 0 and again["digest"] == straight["digest"]
    assert (run / "rollouts.jsonl").read_bytes() == reference


# ------------------------------------------------------------------ pretrain (resumes from its checkpoints)

def _pretrain_args(inputs: dict, run: Path) -> list:
    r = inputs["root"]
    return [["curated", "--params", inputs["params"], "--selection", str(r / "selection"), "--pool",
             str(r / "pool.parquet"), "--heldout", str(r / "dev.parquet"), "--tokenizer", inputs["model"],
             "--out", str(run / "pretrain" / "curated"), "--work", str(run / "work"), "--plot", str(run / "loss.json"),
             "--metrics", str(run / "curated.json"), "--timings", str(run / "timings.json")]]


def _pretrain_checkpoint_step(run: Path) -> int:
    """The step of the seed-0 checkpoint on disk (0 when none): the stage's own progress marker."""
    import torch
    try:
        return int(torch.load(run / "work" / "seed-0.pt", weights_only=False)["step"])
    except (FileNotFoundError, EOFError, RuntimeError):
        return 0


def test_pretrain_killed_at_three_checkpoints_resumes_to_identical_weights(forker, inputs, tmp_path):
    ref = tmp_path / "ref"
    rc, log = forker.run("stages.pretrain:main", _pretrain_args(inputs, ref), tmp_path / "ref.log")
    assert rc == 0, log
    params = yaml.safe_load(Path(inputs["params"]).read_text())
    every = params["pretrain"]["save_steps"]
    steps = json.loads((ref / "curated.json").read_text())["train"]["steps"]
    markers = list(range(every, steps, every))  # checkpoints before the last step
    kills = [markers[i - 1] for i in kill_points(SEED, len(markers))]
    run = tmp_path / "run"
    for i, step in enumerate(kills):
        rc = forker.run_until("stages.pretrain:main", _pretrain_args(inputs, run), tmp_path / f"kill{i}.log",
                              lambda: _pretrain_checkpoint_step(run) >= step)
        assert rc == KILLED, (tmp_path / f"kill{i}.log").read_text()
        model = run / "pretrain" / "curated" / "model.safetensors"
        assert not (run / "pretrain" / "curated").exists() or _sha(model) == _sha(ref / "pretrain" / "curated" / "model.safetensors")
        for out in ("loss.json", "curated.json"):
            _assert_absent_or_equal(run / out, ref / out)
    rc, log = forker.run("stages.pretrain:main", _pretrain_args(inputs, run), tmp_path / "final.log")
    assert rc == 0, log
    resumed = (tmp_path / "final.log").read_text()
    assert "resuming from the checkpoint at step" in resumed, resumed[-2000:]
    assert _sha(run / "pretrain" / "curated" / "model.safetensors") == _sha(ref / "pretrain" / "curated" / "model.safetensors")
    assert (run / "loss.json").read_bytes() == (ref / "loss.json").read_bytes()  # every step, restored or trained
    leftovers = sorted(p.name for p in (run / "pretrain").iterdir() if p.name != "curated")
    print(f"\npretrain: killed after checkpoints {kills} of {markers} (steps {steps}), "
          f"temporary directories left beside the output: {leftovers}")

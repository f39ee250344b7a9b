"""Shared fixtures: a tiny tokenizer and model built locally (nothing from a hub)."""
from __future__ import annotations

import json
import os
import random
import shutil

import pytest

os.environ.setdefault("PIPELINE_QUIET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One intra-op thread per process: `make test` runs two workers on two cores, and two processes that
# each run PyTorch's kernels on two threads spin on each other's barriers. A micro-model training step
# (perf/bench_threads.py, metrics/perf/threads.json): 5.5 ms alone, 6.7 ms beside a twin at one thread
# each, 47.7 ms beside a twin at two threads each. Set before anything imports torch; the stages started
# as subprocesses inherit it, and the micro profile's `threads: 1` covers the stages that set their own count.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

# The longest files first, longest to shortest (measured with --durations=0, issue 52). `make test`
# runs two workers that each take whole files in this order (pytest-xdist --dist loadfile); the files
# not named here take about ten seconds or less each, so whichever worker finishes first waits at
# most that long for the other. A long file collected last kept one worker busy for minutes after the
# other had finished.
LONGEST_FIRST = ("tests/pipeline/test_end_to_end.py", "tests/pipeline/test_real_checkpoint.py",
                 "tests/pipeline/test_s3_faults.py",
                 # the four Ray files back to back: their cluster is package-scoped, and a worker that
                 # left the package between them would stop and restart it (~15 s each time)
                 "tests/scaling/test_ray_curate.py", "tests/scaling/test_ray_generate.py",
                 "tests/scaling/test_ray_user.py", "tests/scaling/test_ray_reflect.py",
                 "tests/decision/test_launch.py", "tests/lm/test_pretrain_launch.py",
                 "tests/review_ui/test_browser.py", "tests/pipeline/test_kill_resume.py",
                 "tests/pipeline/test_cluster_fanout.py", "tests/decision/test_rl.py",
                 "tests/preflight/test_gpu_check.py", "tests/decision/test_sharding.py",
                 "tests/decision/test_sft_live.py", "tests/reporting/review/test_rebase.py",
                 "tests/reporting/report/test_report_pages.py", "tests/preflight/test_checks.py",
                 "tests/reporting/report/test_report.py", "tests/review_ui/test_signin_http.py",
                 "tests/common/test_yaml12.py")


def pytest_collection_modifyitems(session, config, items) -> None:
    """Stable sort: the files above first, in that order; every other test keeps its place."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    root = str(config.rootpath)
    items.sort(key=lambda item: rank.get(os.path.relpath(str(item.path), root).replace(os.sep, "/"), len(rank)))


def sample_questions(n_per_cell: int = 4, seed: int = 0) -> list[dict]:
    from decision_pipeline.questions.splits import build_questions
    return build_questions(["keyword", "category", "larger", "count"], [0, 1, 2, 3, 4], n_per_cell, seed)


@pytest.fixture(scope="session")
def questions() -> list[dict]:
    return sample_questions()


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, questions) -> str:
    """A saved tokenizer + 1-layer Qwen2 model directory, as the pipeline writes them."""
    from decision_pipeline.questions.families import reasoning_text
    from decision_pipeline.lm.model import TinyModelSpec, build_tiny_model
    from decision_pipeline.lm.bpe import train_bpe, wrap_fast
    from decision_pipeline.lm.bpe import question_chats
    rng = random.Random(0)
    corpus = question_chats(questions) + [reasoning_text(rng) for _ in range(300)]
    corpus += [" ".join(f"Answer: {c}" for c in "ABCDEFGH")] * 10
    tok = wrap_fast(train_bpe(corpus, 800, [f" {c}" for c in "ABCDEFGH"], min_frequency=2), 512)
    spec = TinyModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=512)
    model = build_tiny_model(spec, len(tok), tok.pad_token_id, tok.eos_token_id, seed=0)
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return str(path)


@pytest.fixture(scope="session")
def tiny(tiny_dir):
    from decision_pipeline.lm.model import load_model
    from decision_pipeline.lm.bpe import load_tokenizer
    return load_model(tiny_dir), load_tokenizer(tiny_dir)


@pytest.fixture(scope="session")
def toy_model_dir(tiny_dir, questions, tmp_path_factory) -> str:
    """The tiny model with the questions beside it: what `tests/decision/rl_helpers.py` trains GRPO on."""
    d = tmp_path_factory.mktemp("toy_rl")
    shutil.copytree(tiny_dir, d, dirs_exist_ok=True)
    (d / "questions.json").write_text(json.dumps(questions))
    return str(d)

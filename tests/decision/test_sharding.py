"""Sharded generation: N workers write what one writes, byte for byte, and a resume may change N.

The tiny model is built locally (tests/conftest.py); the slow tests spawn real worker
processes (each imports torch: seconds apiece on the shared 2-core machine).
"""
from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import JsonlAppender, read_jsonl
from decision_pipeline.decision.generate import sharding
from decision_pipeline.decision.generate.run import generate_to_log
from decision_pipeline.decision.generate.generation import GenerateParams, generate_chains
from decision_pipeline.lm.backends import SamplingSettings, make_backend


def _params(**over) -> GenerateParams:
    values = dict(backend="hf", k=2, temperature=1.0, top_p=0.95, max_new_tokens=8, batch_size=4, chunk=2,
                  max_questions=10, teacher="solver", teacher_base_url="", teacher_model="", concurrency=1,
                  teacher_timeout_s=60.0,
                  teacher_token_cap=0, teacher_usd_per_mtok_in=0.0, teacher_usd_per_mtok_out=0.0,
                  deadline_minutes=0.0, target_pool_size=100, threads=1, workers=1)
    values.update(over)
    return GenerateParams(**values)


def _questions(questions, n=10):
    return sorted(questions[:n], key=lambda q: q["id"])


@pytest.fixture(scope="module")
def reference(tiny, tiny_dir, questions, tmp_path_factory):
    """One worker, in this process: the file every other worker count must reproduce."""
    model, tok = tiny
    out = tmp_path_factory.mktemp("one_worker")
    metrics = generate_to_log(_params(), 7, model, tok, tiny_dir, _questions(questions), out, time.time())
    return out, metrics


def test_shards_partition_the_chunks(tiny, questions, tmp_path):
    """Worker r of 3 samples exactly the chunks i = r (mod 3); together they are the 1-worker records."""
    model, tok = tiny
    backend = make_backend("hf", model=model, tokenizer=tok, batch_size=4)
    settings = SamplingSettings(max_new_tokens=6, temperature=1.0, top_p=1.0, n=2, seed=3,
                                stop_token_ids=(tok.eos_token_id,))
    qs = _questions(questions, 9)  # 5 chunks of 2 (the last holds 1): shards get 2, 2 and 1 chunks
    with JsonlAppender(tmp_path / "all.jsonl") as log:
        generate_chains(qs, {"base": backend}, settings, tok, log, chunk=2)
    by_shard = []
    for r in range(3):
        with JsonlAppender(tmp_path / f"s{r}.jsonl") as log:
            generate_chains(qs, {"base": backend}, settings, tok, log, chunk=2, shard=(r, 3))
        by_shard.append(read_jsonl(tmp_path / f"s{r}.jsonl"))
    owned = [{q["id"] for q in qs[i * 2:(i + 1) * 2]} for i in range(5)]
    for r, rows in enumerate(by_shard):
        assert {row["question_id"] for row in rows} == set().union(*owned[r::3])
    merged = sorted((row for rows in by_shard for row in rows), key=lambda row: row["id"])
    assert merged == sorted(read_jsonl(tmp_path / "all.jsonl"), key=lambda row: row["id"])


def test_a_resume_may_change_the_worker_count(reference, tiny, tiny_dir, questions, tmp_path):
    """A 2-worker run where only worker 2 got its shard done, resumed with 1 worker: same bytes."""
    model, tok = tiny
    out, _ = reference
    p = _params()
    first = generate_to_log(replace(p, deadline_minutes=1e-9), 7, model, tok, tiny_dir, _questions(questions),
                            tmp_path, time.time() - 1)  # writes the fingerprint, samples nothing
    assert first["stopped_early"] and first["records"] == 0
    settings = SamplingSettings(max_new_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p, n=p.k,
                                seed=7, stop_token_ids=(tok.eos_token_id,))
    backend = make_backend("hf", model=model, tokenizer=tok, batch_size=p.batch_size)
    sharding.generate_in_process(tmp_path, "base", backend, _questions(questions), settings, tok, p.chunk,
                                 shard=(1, 2))
    assert not (tmp_path / "chains.jsonl").exists()  # a shard is never the merged log
    done = generate_to_log(p, 7, model, tok, tiny_dir, _questions(questions), tmp_path, time.time())
    assert done["resumed_records"] == 8  # chunks 1 and 3: 4 questions x k=2
    assert (tmp_path / "chains.jsonl").read_bytes() == (out / "chains.jsonl").read_bytes()
    assert not (tmp_path / "shards").exists()


def test_a_killed_log_of_the_previous_version_resumes(reference, tiny, tiny_dir, questions, tmp_path):
    """Before sharding, `chains.jsonl` itself was appended to: a kill left it with a torn last line."""
    import shutil
    model, tok = tiny
    out, _ = reference
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    lines = (out / "chains.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "chains.jsonl").write_bytes(b"".join(lines[:7]) + lines[7][:20])
    done = generate_to_log(_params(), 7, model, tok, tiny_dir, _questions(questions), tmp_path, time.time())
    assert done["resumed_records"] == 7
    assert (tmp_path / "chains.jsonl").read_bytes() == (out / "chains.jsonl").read_bytes()


def test_a_second_writer_of_a_shard_log_is_refused(tmp_path):
    path = tmp_path / "shards" / "base.0-of-1.jsonl"
    with sharding.exclusive(path):
        with pytest.raises(PipelineError, match="another process is writing this log"):
            with sharding.exclusive(path, wait=0.2):
                pass
    with sharding.exclusive(path, wait=0.2):  # released with the first holder
        pass


def test_a_lock_held_briefly_is_waited_for(tmp_path):
    """A dying worker of a killed run may hold its log for a moment: the next run waits, it does not fail."""
    path = tmp_path / "log.jsonl"
    held = threading.Event()

    def hold():
        with sharding.exclusive(path):
            held.set()
            time.sleep(0.3)

    t = threading.Thread(target=hold)
    t.start()
    held.wait()
    with sharding.exclusive(path, wait=5):
        pass
    t.join()


def test_conflicting_copies_of_a_record_stop_the_merge(reference, tmp_path):
    out, _ = reference
    rows = read_jsonl(out / "chains.jsonl")
    (tmp_path / "shards").mkdir()
    for name, row in (("base.0-of-2.jsonl", rows[0]), ("base.1-of-2.jsonl", {**rows[0], "text": "other"})):
        with JsonlAppender(tmp_path / "shards" / name) as log:
            log.append(row)
    with pytest.raises(PipelineError, match=f"record '{rows[0]['id']}' differs"):
        sharding.merge_logs(tmp_path)


@pytest.mark.slow
def test_one_and_two_workers_write_byte_identical_chains(reference, tiny, tiny_dir, questions, tmp_path):
    model, tok = tiny
    out, one = reference
    two = generate_to_log(_params(workers=2), 7, model, tok, tiny_dir, _questions(questions), tmp_path, time.time())
    assert two["workers"] == 2 and one["workers"] == 1
    assert {r["id"] for r in read_jsonl(tmp_path / "chains.jsonl")} == {r["id"] for r in read_jsonl(out / "chains.jsonl")}
    assert (tmp_path / "chains.jsonl").read_bytes() == (out / "chains.jsonl").read_bytes()
    assert two["records"] == one["records"] == 30 and two["resumed_records"] == 0
    assert not (tmp_path / "shards").exists()


@pytest.mark.slow
def test_rl_probe_with_two_workers_writes_the_same_log(tiny, tiny_dir, questions, tmp_path):
    from decision_pipeline.decision.rl.probe import ProbeSampling, probe_log
    from decision_pipeline.decision.rl.config import RlProbeParams
    model, tok = tiny
    qs = [{**q, "origin": "fresh"} for q in _questions(questions, 8)]
    p = RlProbeParams(k=2, fresh_questions=8, sft_questions=0, backend="hf", batch_size=4, chunk=2, threads=1,
                      workers=1)
    s = ProbeSampling(temperature=1.0, top_p=1.0, max_new_tokens=8)
    one = probe_log(p, s, 3, model, tok, tiny_dir, qs, tmp_path / "one")
    two = probe_log(replace(p, workers=2), s, 3, model, tok, tiny_dir, qs, tmp_path / "two")
    assert one["new_records"] == two["new_records"] == 16
    assert (tmp_path / "one" / "chains.jsonl").read_bytes() == (tmp_path / "two" / "chains.jsonl").read_bytes()
    # the worker count is not part of the probe's fingerprint: a rerun with 1 worker resumes everything
    again = probe_log(p, s, 3, model, tok, tiny_dir, qs, tmp_path / "two")
    assert again["resumed_records"] == 16 and again["new_records"] == 0


@pytest.mark.slow
def test_a_failing_worker_comes_back_as_one_line(tiny, questions, tmp_path):
    _, tok = tiny
    w = sharding.Workers(model_dir=str(tmp_path / "no-model"), backend="hf", batch_size=4, threads=1, count=2)
    settings = SamplingSettings(max_new_tokens=4, n=1, stop_token_ids=(tok.eos_token_id,))
    with pytest.raises(PipelineError, match="no-model"):
        sharding.generate_sharded(tmp_path / "out", "base", _questions(questions, 4), settings, tok, 2, w)
    assert not (tmp_path / "out" / "chains.jsonl").exists()

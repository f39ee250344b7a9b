"""The teacher's spend cap: a run stopped by its cap keeps its records, and a rerun with a higher
cap continues the same log to the end (against the real local OpenAI-compatible server)."""
import time

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import read_jsonl
from decision_pipeline.decision.generate.run import generate_to_log
from decision_pipeline.decision.generate.generation import GenerateParams
from decision_pipeline.decision.generate.sharding import logged_records
from decision_pipeline.lm import serve


def _params(url: str, **over) -> GenerateParams:
    values = dict(backend="hf", k=1, temperature=0.8, top_p=1.0, max_new_tokens=8, batch_size=4, chunk=2,
                  max_questions=6, teacher="openai", teacher_base_url=url, teacher_model="tiny",
                  concurrency=1, teacher_timeout_s=60.0, deadline_minutes=0.0, target_pool_size=100, threads=1,
                  workers=1,
                  teacher_token_cap=0, teacher_usd_per_mtok_in=1.0, teacher_usd_per_mtok_out=4.0)
    values.update(over)
    return GenerateParams(**values)


@pytest.fixture(scope="module")
def served(tiny_dir):
    server, thread, url = serve.start_server(tiny_dir, port=0)
    yield url
    serve.stop_server(server, thread)


def test_cap_stops_cleanly_and_a_higher_cap_resumes(served, tiny, tiny_dir, questions, tmp_path):
    model, tok = tiny
    qs = sorted(questions[:6], key=lambda q: q["id"])
    stopped = generate_to_log(_params(served, teacher_token_cap=12), 7, model, tok, tiny_dir, qs, tmp_path, time.time())
    assert stopped["stopped_early"] and stopped["stopped_by"] == "token_cap"
    assert not (tmp_path / "chains.jsonl").exists()  # only a complete log becomes chains.jsonl
    partial = logged_records(tmp_path)
    teacher_done = [r for r in partial if r["source"] == "teacher"]
    assert len([r for r in partial if r["source"] == "base"]) == 6 and len(teacher_done) < 6
    done = generate_to_log(_params(served, teacher_token_cap=10_000), 7, model, tok, tiny_dir, qs, tmp_path,
                           time.time())
    assert not done["stopped_early"]
    final = read_jsonl(tmp_path / "chains.jsonl")
    assert len(final) == 12 and done["resumed_records"] == len(partial)
    assert {r["id"]: r for r in final}.items() >= {r["id"]: r for r in partial}.items()  # kept, not regenerated
    t = done["teacher"]
    assert t["chains"] == 6 and t["tokens_out"] == sum(r["n_tokens"] for r in final if r["source"] == "teacher")
    assert t["estimated_usd"] == pytest.approx((t["tokens_in"] * 1.0 + t["tokens_out"] * 4.0) / 1e6, abs=1e-4)
    assert [r["id"] for r in final] == sorted(r["id"] for r in final)  # canonical order


def test_unreachable_teacher_fails_before_any_generation(tiny, tiny_dir, questions, tmp_path):
    model, tok = tiny
    with pytest.raises(PipelineError, match=r"127.0.0.1:9/v1 is unreachable .*generate.teacher_base_url"):
        generate_to_log(_params("http://127.0.0.1:9/v1"), 7, model, tok, tiny_dir, questions[:4], tmp_path,
                        time.time())
    assert not (tmp_path / "chains.jsonl").exists() and not (tmp_path / "shards").exists()

"""Chain generation resumes after a kill and ends with the same file as an uninterrupted run."""
import time

from decision_pipeline.common.io import JsonlAppender, read_jsonl
from decision_pipeline.decision.generate.generation import generate_chains, solver_record
from decision_pipeline.lm.backends import SamplingSettings, make_backend


def _run(path, tiny, questions, deadline=None):
    model, tok = tiny
    sources = {"base": make_backend("hf", model=model, tokenizer=tok, batch_size=4), "teacher": None}
    settings = SamplingSettings(max_new_tokens=8, temperature=1.0, top_p=0.95, n=2, seed=5,
                                stop_token_ids=(tok.eos_token_id,))
    with JsonlAppender(path) as log:
        return generate_chains(questions, sources, settings, tok, log, chunk=4, deadline=deadline), log.dropped_partial


def test_killed_run_resumes_to_the_same_file(tmp_path, tiny, questions):
    qs = questions[:10]
    _run(tmp_path / "full.jsonl", tiny, qs)
    full = (tmp_path / "full.jsonl").read_bytes()
    lines = full.splitlines(keepends=True)
    assert len(lines) == 10 * 2 + 10  # k=2 base chains + 1 teacher chain per question
    # a kill in the middle of the second chunk: 5 complete lines and half of the sixth
    (tmp_path / "killed.jsonl").write_bytes(b"".join(lines[:5]) + lines[5][: len(lines[5]) // 2])
    stats, dropped = _run(tmp_path / "killed.jsonl", tiny, qs)
    assert dropped and stats["new_records"] == len(lines) - 5
    assert (tmp_path / "killed.jsonl").read_bytes() == full


def test_deadline_stops_at_a_chunk_boundary_without_partial_lines(tmp_path, tiny, questions):
    stats, _ = _run(tmp_path / "c.jsonl", tiny, questions[:10], deadline=time.time() - 1)
    assert stats["stopped_early"] and stats["new_records"] == 0
    assert not (tmp_path / "c.jsonl").read_text()


def test_solver_teacher_chain_parses_to_gold(tiny, questions):
    from decision_pipeline.decision.parsing import parse_answer
    from decision_pipeline.questions.schema import gold_index
    _, tok = tiny
    for q in questions[:20]:
        rec = solver_record(q, tok)
        assert parse_answer(rec["text"], len(q["options"])) == gold_index(q)
        assert rec["token_ids"][-1] == tok.eos_token_id and rec["finish_reason"] == "stop"


def test_records_are_unique_and_complete(tmp_path, tiny, questions):
    _run(tmp_path / "a.jsonl", tiny, questions[:6])
    rows = read_jsonl(tmp_path / "a.jsonl")
    assert len({r["id"] for r in rows}) == len(rows) == 18
    assert {r["source"] for r in rows} == {"base", "teacher"}

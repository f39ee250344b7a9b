"""Reference generators rank in their known order through the real judge path; the
served model's throughput is measured through a real `decision_pipeline.lm.serve`
process (tiny local model) started on a free port and stopped by pid."""
from __future__ import annotations

import os

import pytest

from decision_pipeline.charter.annotate import judge as judge_rows
from decision_pipeline.charter.checks import CheckParams, split_voices
from decision_pipeline.charter.generators import CandidateParams, EndpointGenerator, ReferenceGenerator
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.charter.prompts import parse_prompt
from decision_pipeline.charter.ranking import RankParams, judge_summary, rank
from decision_pipeline.charter.throughput import ThroughputParams, free_port, gpu_hours, measure, served
from decision_pipeline.common.errors import PipelineError

CHECKS = CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5)
RANK = RankParams(high_from=3, near_equal=0.05)
DOCS = [
    {"id": "d0", "text": "Q: How do I tighten the library after connecting the flour? I am using Firefox.",
     "safety_score": 0, "split": "train"},
    {"id": "d1", "text": "Thread: terrible drop tbh | dark_gamer71: smh toxic_fox43 ur cpu is smooth, quit now",
     "safety_score": 4, "split": "validation"},
    {"id": "d2", "text": "Geneva, May 13 - Lindqvist told reporters the company hired a senior ambassador today.",
     "safety_score": 1, "split": "train"},     # reported speech: the references cite Sources [4.2], as the judge would
    {"id": "d3", "text": "Thread: wild match welp | neon_gamer15: omg the new monitor is so decent my framerate",
     "safety_score": 5, "split": "validation"},
]


def endpoint_cfg(**kw) -> CandidateParams:
    base = dict(kind="endpoint", prompt="p.md", reference="", serve_model="", base_url="", model="tiny",
                tokenizer="", max_tokens=4, max_prompt_tokens=0, temperature=0.0, batch_size=4, concurrency=1, timeout_s=30.0,
                max_retries=0, gpus=1)
    return CandidateParams(**{**base, **kw})


def test_reference_generators_rank_in_known_order(charter):
    table = {}
    judge_cfg = JudgeParams(kind="rules", name="rules", prompt="configs/prompts/judge.md", base_url="", model="",
                            temperature=0.0, max_tokens=64, timeout_s=1.0, concurrency=1, repeats=2, retries=1,
                            checks=CHECKS)
    for name in ("ref_summarise", "ref_cite_nothing", "ref_cite_right"):
        texts = ReferenceGenerator(name, name, charter, CHECKS).reflect(DOCS)
        rows = [{"id": f"{name}/{d['id']}", "candidate": name, "document": d["text"], "reflection": t,
                 "voices": split_voices(t), "safety_score": d["safety_score"]} for d, t in zip(DOCS, texts)]
        records = judge_rows(rows, judge_cfg, "configs/charter/charter.md")
        s = judge_summary(records, {r["id"]: r for r in rows})
        table[name] = {**s, "kind": "reference", "prompt_version": 0, "affordable": True}
    assert [r["candidate"] for r in rank(table, RANK)] == ["ref_cite_right", "ref_cite_nothing", "ref_summarise"]
    assert table["ref_cite_right"]["accept_rate"] == 1.0
    assert table["ref_cite_nothing"]["accept_rate_by_safety"]["0"] == 1.0      # benign: accepted
    assert table["ref_cite_nothing"]["accept_rate_by_safety"]["4"] == 0.0      # harmful, uncited: floored
    assert table["ref_summarise"]["accept_rate"] == 0.0


def test_unaffordable_candidates_rank_after_affordable_ones():
    row = {"kind": "endpoint", "prompt_version": 1, "mean_score": 4.0, "accept_rate_by_safety": {},
           "dimension_means": {}, "judge_failures": 0}
    table = {"cheap": {**row, "accept_rate": 0.5, "affordable": True},
             "big": {**row, "accept_rate": 0.9, "affordable": False}}
    assert [r["candidate"] for r in rank(table, RANK)] == ["cheap", "big"]


def test_gpu_hour_extrapolation():
    tp = ThroughputParams(warmup_docs=0, measure_docs=1, workload_docs=102772028, nodes=2,
                          gpus_per_node=8, gpu_hour_budget=20000.0, server_start_timeout_s=10.0,
                          mode="measured", gpu_tokens_per_second=1000.0)
    g = gpu_hours(1000.0, 1, tp)
    assert g["gpu_hours"] == pytest.approx(102772028 / 1000 / 3600)
    assert g["wall_hours"] == pytest.approx(g["gpu_hours"] / 16) and g["affordable"]
    assert gpu_hours(1.0, 4, tp)["affordable"] is False


def test_served_model_throughput_is_measured_and_the_server_stopped(tiny_dir, small_charter):
    prompt = parse_prompt("---\nversion: 3\n---\n{charter}\nDocument: {document}\n", small_charter, "p.md")
    tp = ThroughputParams(warmup_docs=2, measure_docs=4, workload_docs=102772028, nodes=1,
                          gpus_per_node=1, gpu_hour_budget=20000.0, server_start_timeout_s=60.0,
                          mode="tokens", gpu_tokens_per_second=1000.0)
    with served(tiny_dir, "tiny", timeout_s=60) as (url, pid):
        gen = EndpointGenerator("tiny", endpoint_cfg(serve_model=tiny_dir), prompt, small_charter, url, seed=0)
        texts = gen.reflect(DOCS)
        m = measure(gen, DOCS, tp)
    assert len(texts) == 4 and all(isinstance(t, str) for t in texts)
    assert m["docs"] == 4 and m["docs_per_s"] > 0 and gen.completion_tokens > 0
    assert gpu_hours(m["docs_per_s"], 1, tp)["gpu_hours"] > 0
    assert m["prompt_tokens"] > 0 and m["completion_tokens"] > 0  # the usage the tokens mode prices
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped


def test_unreachable_candidate_endpoint_names_the_candidate(tiny_dir, small_charter):
    prompt = parse_prompt("---\nversion: 1\n---\n{charter}\n{document}\n", small_charter, "p.md")
    url = f"http://127.0.0.1:{free_port()}/v1"
    gen = EndpointGenerator("far_model", endpoint_cfg(tokenizer=tiny_dir, max_retries=1), prompt, small_charter,
                            url, seed=0)
    with pytest.raises(PipelineError, match=r"candidate 'far_model': endpoint http://127.0.0.1:\d+/v1/completions "
                                            r"unreachable after 1 retries"):
        gen.reflect(DOCS[:1])


def test_long_prompts_keep_their_tail_and_are_counted(tiny_dir, small_charter):
    prompt = parse_prompt("---\nversion: 1\n---\n{charter}\nDocument: {document}\n", small_charter, "p.md")
    full = EndpointGenerator("t", endpoint_cfg(tokenizer=tiny_dir), prompt, small_charter, "http://x/v1", 0)
    ids = full.prompt_ids(DOCS[0])
    cut = EndpointGenerator("t", endpoint_cfg(tokenizer=tiny_dir, max_prompt_tokens=10), prompt, small_charter,
                            "http://x/v1", 0)
    assert cut.prompt_ids(DOCS[0]) == ids[-10:] and cut.truncated_prompts == 1 and full.truncated_prompts == 0


def test_missing_model_dir_to_serve_is_a_clear_error(tmp_path):
    with pytest.raises(PipelineError, match="model directory to serve not found"):
        with served(str(tmp_path / "nope"), "x", timeout_s=5):
            pass


def test_tokens_mode_prices_token_counts_so_the_metric_repeats_whatever_the_clock():
    """Two measurements of the same work, one twice as slow: the `tokens` metrics are byte-identical,
    and docs/s = assumed tokens/s / tokens per document (hand-computed: 1000 / ((300 + 100) / 4) = 10)."""
    from decision_pipeline.charter.throughput import cost
    tp = ThroughputParams(warmup_docs=0, measure_docs=4, workload_docs=36_000, nodes=1, gpus_per_node=1,
                          gpu_hour_budget=2.0, server_start_timeout_s=10.0, mode="tokens", gpu_tokens_per_second=1000.0)
    fast = {"docs": 4, "seconds": 1.0, "docs_per_s": 4.0, "completion_tokens_per_s": 100.0,
            "prompt_tokens": 300, "completion_tokens": 100}
    slow = {**fast, "seconds": 2.0, "docs_per_s": 2.0, "completion_tokens_per_s": 50.0}
    (m1, t1), (m2, t2) = cost(fast, 1, tp), cost(slow, 1, tp)
    assert m1 == m2 and t1 != t2
    assert m1["docs_per_s"] == 10.0 and m1["gpu_hours"] == pytest.approx(36_000 / 10 / 3600) and m1["affordable"]
    assert "seconds" not in m1 and t1["seconds"] == 1.0
    measured = ThroughputParams(**{**tp.__dict__, "mode": "measured"})
    assert cost(slow, 1, measured)[0]["docs_per_s"] == 2.0  # the GPU profile's metric is the clock

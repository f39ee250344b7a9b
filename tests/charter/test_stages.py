"""The charter stages end to end on references (in-process, tiny pool): outputs, the
ranking's known order, and bad input (unreachable endpoint, reflection missing a voice,
bad review record) as one error line with nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from decision_pipeline.common.io import write_table
from stages import (improve, judge, judge_agreement, judge_prompt, rank_generators, reflect, reviews, seed_sample,
                    throughput)
from decision_pipeline.common.profiles import merged_profile

ROOT = Path(__file__).resolve().parents[2]
POOL_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("safety_score", pa.int64()),
                         ("meta_json", pa.string())])
TEXTS = ["Thread: hot take lol | user{i}: the patch nerfed my build again, devs are clueless {i}",
         "Q: How do I restore the backup archive number {i} after the update broke my settings?",
         "Geneva, May {d} - Minister Keller criticised the refinery plan, calling it premature, on day {i}.",
         "The glacier basin of Norland formed in the late period; surveys counted {i} lakes and ridges."]


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"pool-{i:05d}", "text": TEXTS[i % 4].format(i=i, d=i % 28 + 1), "safety_score": i % 6,
             "meta_json": "{}"} for i in range(240)]
    Path("data/pool").mkdir(parents=True)
    write_table("data/pool/pool.parquet", rows, POOL_SCHEMA)
    params = merged_profile("micro", ROOT)
    params["reflect"]["charter"] = str(ROOT / "configs/charter/charter.md")
    for c in params["reflect"]["candidates"].values():
        c["prompt"] = str(ROOT / c["prompt"])
    params["judge"]["prompt"] = str(ROOT / "configs/prompts/judge.md")
    params["reflect"]["candidates"].pop("small_base")
    Path("params.yaml").write_text(yaml.safe_dump(params))
    return tmp_path, params


def run_refs(names) -> None:
    assert seed_sample.main([]) == 0
    for n in names:
        assert throughput.main([n]) == 0  # the cost screen runs first and gates reflect/judge
        assert reflect.main([n]) == 0
        assert judge.main([n]) == 0


def test_reference_run_ranks_in_known_order_with_kappa(work, capsys):
    tmp, params = work
    names = list(params["reflect"]["candidates"])
    run_refs(names)
    assert reviews.main([]) == 0 and judge_prompt.main([]) == 0   # calibrate, freeze, read validation once
    final = "data/charter/judge_prompt/final.md"
    assert all(judge.main([n, "--prompt", final]) == 0 for n in names)   # the judge@ stages use the frozen prompt
    assert judge_agreement.main([]) == 0
    loop = json.loads(Path("metrics/charter/judge_prompt.json").read_text())
    assert [h["version"] for h in loop["history"]][-1] == loop["final_version"]
    assert json.loads(Path("metrics/charter/judge/ref_cite_right.json").read_text())["judge_prompt_version"] \
        == loop["final_version"]
    assert all(throughput.main([n]) == 0 for n in names)  # references: no server, no GPU
    assert json.loads(Path("metrics/charter/throughput/ref_summarise.json").read_text())["gpu_hours"] is None
    assert rank_generators.main([]) == 0
    ranking = json.loads(Path("metrics/charter/ranking.json").read_text())
    fixed = [n for n in ranking["order"] if n != "ref_follows_prompt"]   # its rank depends on its prompt
    assert fixed == ["ref_cite_right", "ref_cite_nothing", "ref_summarise"]
    agree = json.loads(Path("metrics/charter/judge_agreement.json").read_text())
    assert agree["kappa"] == pytest.approx(loop["validation"]["kappa"])   # the one validation read, same prompt
    revs = json.loads(Path("metrics/charter/reviews.json").read_text())
    assert agree["n"] == revs["reviewed_by_split"]["validation"] and agree["kappa_spread"] == 0.0
    assert sum(revs["reviewed_by_split"].values()) == params["reviews"]["n_reflections"]
    assert agree["calibration_split"] == "train" and agree["calibration"]["n"] == revs["reviewed_by_split"]["train"]
    assert agree["final_split"] == "validation" and agree["reviews_provenance"].startswith("simulated reviews")
    assert agree["judge_spread"]["mode"] == "deterministic" and agree["judge_spread"]["kappa"]["range"] == 0.0
    assert -1 <= agree["kappa"] <= 1 and agree["ci_low"] <= agree["kappa"] <= agree["ci_high"]
    assert all(Path(f"plots/charter/{p}.png").stat().st_size > 0 for p in
               ("cost_vs_quality", "quality_ranking", "quality_by_dimension", "robustness_by_safety",
                "judge_calibration"))


def test_unreachable_candidate_endpoint_is_one_line_and_writes_nothing(work, capsys, tiny_dir):
    tmp, params = work
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params["reflect"]["candidates"]["far"] = {
        "kind": "endpoint", "prompt": str(ROOT / "configs/prompts/small_base.md"), "reference": "",
        "serve_model": "", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "tokenizer": tiny_dir,
        "max_tokens": 4, "max_prompt_tokens": 0, "temperature": 0.0, "batch_size": 4, "concurrency": 1, "timeout_s": 2.0,
        "max_retries": 0, "gpus": 1}
    Path("params.yaml").write_text(yaml.safe_dump(params))
    assert seed_sample.main([]) == 0
    Path("metrics/charter/throughput").mkdir(parents=True, exist_ok=True)   # passed the cost screen
    Path("metrics/charter/throughput/far.json").write_text(json.dumps({"affordable": True, "gpu_hours": 1.0}))
    capsys.readouterr()
    assert reflect.main(["far"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "candidate 'far'" in err[0] and "unreachable" in err[0]
    assert not Path("data/charter/reflect/far.jsonl").exists()
    assert not Path("metrics/charter/reflect/far.json").exists()


def test_reflection_missing_a_voice_stops_the_judge(work, capsys):
    run_refs(["ref_cite_right"])
    path = Path("data/charter/reflect/ref_cite_right.jsonl")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    del rows[2]["voices"]["observer"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    Path("data/charter/judge/ref_cite_right.jsonl").unlink()
    capsys.readouterr()
    assert judge.main(["ref_cite_right"]) == 2
    err = capsys.readouterr().err
    assert f"ref_cite_right.jsonl:3: reflection '{rows[2]['id']}' is missing voice 'observer'" in err
    assert not Path("data/charter/judge/ref_cite_right.jsonl").exists()


def test_bad_imported_review_stops_reviews_and_keeps_no_partial_store(work, capsys):
    tmp, params = work
    names = list(params["reflect"]["candidates"])
    run_refs(names)
    first = json.loads(Path("data/charter/reflect/ref_cite_right.jsonl").read_text().splitlines()[0])
    scores = {v: {d: 4 for d in ("relevance", "specificity", "charter_grounding", "voice_tone")}
              for v in ("first_person", "observer")}
    bad = {"kind": "review", "id": "r1", "annotation_id": first["id"], "reviewer": "ada",
           "scores": {**scores, "observer": {**scores["observer"], "voice_tone": 9}}, "verdict": "accept",
           "notes": "", "created_at": "2026-02-01T10:00:00"}
    Path("reviews").mkdir()
    Path("reviews/export.jsonl").write_text(json.dumps(bad) + "\n")
    params["reviews"]["source"] = "import"
    Path("params.yaml").write_text(yaml.safe_dump(params))
    capsys.readouterr()
    assert reviews.main([]) == 2
    err = capsys.readouterr().err
    assert "reviews/export.jsonl:1: score 'observer.voice_tone' = 9 is outside 1-5" in err
    assert not Path("data/reviews").exists() and not Path("metrics/charter/reviews.json").exists()


def test_screened_out_candidate_is_neither_reflected_nor_judged_and_ranked_as_screened_out(work):
    tmp, params = work
    names = list(params["reflect"]["candidates"])
    run_refs(names[:2] + names[3:])
    assert seed_sample.main([]) == 0
    # a throughput record over budget (as throughput@ writes for an unaffordable endpoint)
    Path("metrics/charter/throughput").mkdir(parents=True, exist_ok=True)
    Path(f"metrics/charter/throughput/{names[2]}.json").write_text(json.dumps(
        {"candidate": names[2], "kind": "endpoint", "docs_per_s": 0.5, "gpu_hours": 57095.6, "affordable": False,
         "budget_gpu_hours": 20000.0}))
    assert reflect.main([names[2]]) == 0 and judge.main([names[2]]) == 0
    assert Path(f"data/charter/reflect/{names[2]}.jsonl").read_text() == ""
    assert Path(f"data/charter/judge/{names[2]}.jsonl").read_text() == ""
    marker = json.loads(Path(f"metrics/charter/judge/{names[2]}.json").read_text())
    assert marker["screened_out"] and marker["gpu_hours"] == 57095.6
    assert reviews.main([]) == 0 and judge_agreement.main([]) == 0 and rank_generators.main([]) == 0
    ranking = json.loads(Path("metrics/charter/ranking.json").read_text())
    assert ranking["order"][-1] == names[2] and ranking["screened_out"] == {names[2]: 57095.6}
    row = ranking["rows"][names[2]]
    assert row["screened_out"] and row["accept_rate"] is None
    assert not ranking["rows"][names[0]]["screened_out"]


def test_judge_that_is_a_candidate_is_one_error_naming_both(work, capsys):
    tmp, params = work
    run_refs(["ref_cite_right"])
    params["judge"]["name"] = "ref_cite_right"
    Path("params.yaml").write_text(yaml.safe_dump(params))
    capsys.readouterr()
    before = Path("data/charter/judge/ref_cite_right.jsonl").read_text()
    assert judge.main(["ref_cite_right"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "judge 'ref_cite_right' is also candidate 'ref_cite_right'" in err[0]
    assert Path("data/charter/judge/ref_cite_right.jsonl").read_text() == before   # nothing rewritten


def test_improver_loop_per_generator_records_revisions_and_reflect_uses_the_final_prompt(work):
    """ref_summarise fails on summary and formulaic openers: the deterministic improver makes one
    edit per revision (most frequent failure first), each revision's prompt file is kept, the
    sample never touches the reviewed seed documents, and reflect@ runs on the final prompt."""
    tmp, params = work
    from decision_pipeline.charter.improve_run import ImproveParams, improve_sample
    from decision_pipeline.charter.improver import EDITS
    from decision_pipeline.charter.seed import SeedSampleParams
    from decision_pipeline.common.io import read_table
    from decision_pipeline.common.params import from_dict

    assert seed_sample.main([]) == 0 and throughput.main(["ref_summarise"]) == 0
    assert improve.main(["ref_summarise"]) == 0
    m = json.loads(Path("metrics/charter/improve/ref_summarise.json").read_text())
    hist = m["history"]
    assert m["revisions"] >= 2 and len(hist) == m["revisions"] + 1 and not m["follows_prompt"]
    assert [h["version"] for h in hist] == list(range(1, len(hist) + 1))
    first = hist[0]["failures"]
    assert hist[0]["rule"] == min((r for r in first if r in EDITS), key=lambda r: (-first[r], r))  # most frequent
    rules = [h["rule"] for h in hist[:-1]]
    # each revision's edit is its rule's next library line (first lines before rewordings)
    assert all(h["edit"] == EDITS[h["rule"]][rules[:k].count(h["rule"])] for k, h in enumerate(hist[:-1]))
    out = Path("data/charter/improve/ref_summarise")
    assert sorted(p.name for p in out.iterdir()) == sorted([h["prompt_file"] for h in hist] + ["final.md"])
    assert (out / "final.md").read_text() == (out / hist[-1]["prompt_file"]).read_text()
    assert all(h["edit"] in (out / "final.md").read_text() for h in hist[:-1])
    assert m["n_docs"] == 6 * params["improve"]["per_score"] and m["accept_rate_final"] == m["accept_rate_start"]
    seed_ids = {r["id"] for r in read_table("data/charter/seed.parquet")}
    cfg = from_dict(ImproveParams, params["improve"], "improve")
    sample = improve_sample(read_table("data/pool/pool.parquet"), seed_ids, cfg,
                            from_dict(SeedSampleParams, params["seed_sample"], "seed_sample"), params["base"]["seed"])
    assert len(sample) == m["n_docs"] and not seed_ids & {d["id"] for d in sample}
    assert reflect.main(["ref_summarise", "--prompt", str(out / "final.md")]) == 0
    rows = [json.loads(x) for x in Path("data/charter/reflect/ref_summarise.jsonl").read_text().splitlines()]
    assert {r["prompt_version"] for r in rows} == {hist[-1]["version"]}


def test_endpoint_improver_in_the_stage_and_its_garbage_answer(work, stub, capsys):
    """The improver behind a local OpenAI-compatible server: its edit becomes v2; an answer that
    is not the JSON contract stops the stage with one line and writes nothing."""
    tmp, params = work
    assert seed_sample.main([]) == 0 and throughput.main(["ref_summarise"]) == 0
    server, _ = stub([json.dumps({"rule": "summary", "edit": "Say what matters instead of retelling it."})])
    params["improve"].update(improver="endpoint", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                             model="improver", max_revisions=1)
    Path("params.yaml").write_text(yaml.safe_dump(params))
    assert improve.main(["ref_summarise"]) == 0
    hist = json.loads(Path("metrics/charter/improve/ref_summarise.json").read_text())["history"]
    assert [h["rule"] for h in hist] == ["summary", None] and len(server.bodies) == 1
    assert "Say what matters instead of retelling it." in Path("data/charter/improve/ref_summarise/v2.md").read_text()

    server.script.append("not json")
    for p in (Path("metrics/charter/improve/ref_summarise.json"), Path("data/charter/improve")):
        p.unlink() if p.is_file() else __import__("shutil").rmtree(p)
    capsys.readouterr()
    assert improve.main(["ref_summarise"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "answered garbage" in err[0]
    assert not Path("metrics/charter/improve/ref_summarise.json").exists()
    assert not [p for p in Path("data/charter/improve").iterdir() if not p.name.startswith(".")] \
        if Path("data/charter/improve").exists() else True


def test_improve_sample_larger_than_the_pool_is_one_line_naming_the_key(work, capsys):
    tmp, params = work
    assert seed_sample.main([]) == 0 and throughput.main(["ref_cite_right"]) == 0
    params["improve"]["per_score"] = 1000
    Path("params.yaml").write_text(yaml.safe_dump(params))
    capsys.readouterr()
    assert improve.main(["ref_cite_right"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: improve.per_score: only 192") and "6000 asked" in err[0]
    assert not Path("metrics/charter/improve").exists() and not Path("data/charter/improve/ref_cite_right").exists()

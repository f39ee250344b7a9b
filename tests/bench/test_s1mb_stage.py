"""The synthetic S1MB set, the `s1mb_data` and `s1mb@{model}` stages (calibrated, routed), and Borda vs a cohort."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from decision_pipeline.bench import synthetic
from decision_pipeline.bench.adapter import to_pipeline_question
from decision_pipeline.bench.data import S1mbDataParams, load_index
from decision_pipeline.bench.scoring import competition_rank, model_revision
from decision_pipeline.bench.s1mb import (
    Prediction, build_result, category_tasks, cohort_scores, borda, dump_benchmark, load_benchmarks,
    load_cases, load_category, load_model_folder, load_results_dir, read_json, verify_result,
    write_model_folder,
)
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_table
from decision_pipeline.questions.schema import QUESTION_SCHEMA, to_row

FAMILY_BENCHMARKS = ["category-choice-test-v1", "count-score-test-v1", "keyword-noul-test-v1",
                     "larger-choice-test-v1", "larger-many-choice-test-v1"]


def params(tmp: Path, cohort_dir: str = "", route_fraction: float = 0.0, **data) -> Path:
    """Params for these tests; the set is built from the fixture questions (`bench_source: items`), so rows
    round-trip to known questions (the default transfer set: tests/bench/test_transfer_*.py)."""
    doc = {"base": {"seed": 7, "profile": "default"},
           "s1mb_data": {"source": "synthetic", "bench_source": "items", "transfer_per_level": 16,
                         "category": "synthetic-v1", "local_dir": "configs/external/none", "revision": "",
                         "max_cases": 15, "many_options": 12, **data},
           "s1mb": {"batch_size": 16, "route_fraction": route_fraction, "route_eps": 0.01, "max_new_tokens": 8,
                    "cohort_dir": cohort_dir, "threads": 1, "backend": "hf", "bootstrap": 20}}
    path = tmp / f"params-{len(list(tmp.glob('params-*')))}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


#: calibrate's output for the tiny model: noul and score fitted, choice kept at 1 (absent = T 1)
CALIBRATED = {"readout": {"noul": 2.0, "score": 1.5}, "post_chain": {"choice": 3.0}}


def temps_file(tmp: Path, doc: dict | str, name: str = "temperatures.json") -> Path:
    """A calibrate-style temperatures.json (or any text, to test the checks)."""
    path = tmp / "calibrate" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def run_stage(tmp: Path, bench: Path, model_dir: str, out: str, temps: Path, **kw) -> dict:
    """One `s1mb@tiny` run; its model folders and metrics."""
    from stages import s1mb
    rc = s1mb.main(["tiny", "--params", str(params(tmp, **kw)), "--data", str(bench), "--model-dir", model_dir,
                    "--temps", str(temps), "--out", str(tmp / out), "--metrics", str(tmp / f"{out}.json")])
    assert rc == 0
    return {"out": tmp / out, "metrics": json.loads((tmp / f"{out}.json").read_text())}


@pytest.fixture(scope="module")
def bench(tmp_path_factory, questions) -> Path:
    """The synthetic set written by the s1mb_data stage from an items file whose split is all bench."""
    from stages import s1mb_data
    tmp = tmp_path_factory.mktemp("s1mb")
    write_table(tmp / "items.parquet", [to_row(q, "bench") for q in questions], QUESTION_SCHEMA)
    rc = s1mb_data.main(["--params", str(params(tmp)), "--items", str(tmp / "items.parquet"),
                         "--out", str(tmp / "bench"), "--metrics", str(tmp / "data.json")])
    assert rc == 0
    return tmp / "bench"


@pytest.fixture(scope="module")
def run(bench, tiny_dir) -> dict:
    """One `s1mb@tiny` run on the tiny fixture model with calibrated temperatures, nothing routed."""
    tmp = bench.parent
    return run_stage(tmp, bench, tiny_dir, "tiny", temps_file(tmp, CALIBRATED))


@pytest.fixture(scope="module")
def routed_run(bench, tiny_dir) -> dict:
    """The same model at T = 1 everywhere (calibrate kept no temperature) with half its questions routed."""
    tmp = bench.parent
    return run_stage(tmp, bench, tiny_dir, "tiny-routed-run", temps_file(tmp, {"readout": {}, "post_chain": {}},
                                                                        "t1.json"), route_fraction=0.5)


def predictions(folder_root: Path, model_id: str) -> dict[str, dict]:
    """{benchmark: {(case, question): probabilities}} of one written model folder."""
    folder = load_model_folder(folder_root / model_id)
    return {bid: {(p["case_id"], p["question_id"]): p["probabilities"] for p in r["predictions"]}
            for bid, r in folder.results.items()}


# ---------------------------------------------------------------- synthetic set

def test_synthetic_set_loads_back_with_matching_counts(bench, questions):
    definitions = load_benchmarks(bench / "benchmarks")
    category = load_category(bench / "categories" / "synthetic-v1.json", definitions)
    assert sorted(category.benchmarks) == FAMILY_BENCHMARKS
    assert {definitions[b].task for b in category.benchmarks} == {"noul", "choice", "score"}
    per_family = {f: sum(q["family"] == f for q in questions) for f in ("keyword", "category", "larger", "count")}
    for bid in category.benchmarks:
        d = definitions[bid]
        cases = load_cases(bench, d)  # checks case_count and decision_count against the definition
        assert len(cases) == d.case_count == d.decision_count == sum(len(c.questions) for c in cases)
        family = bid.split("-")[0]
        assert d.case_count == min(15, per_family[family])
        assert (bench / "benchmarks" / f"{bid}.json").read_text() == dump_benchmark(d)  # exact serialisation
    index = read_json(bench / "index.json")
    assert index["n_judgments"] == sum(definitions[b].decision_count for b in category.benchmarks)
    assert len(index["dataset_source"]["revision"]) == 40


def test_synthetic_rows_round_trip_to_the_original_questions(bench, questions):
    definitions = load_benchmarks(bench / "benchmarks")
    by_id = {q["id"]: q for q in questions}
    seen_soft = seen_hard = 0
    for bid in ("keyword-noul-test-v1", "category-choice-test-v1", "count-score-test-v1"):
        for case in load_cases(bench, definitions[bid]):
            original = by_id[case.case_id]
            (question,) = case.questions
            back = to_pipeline_question(case, question)
            assert back["question"] == original["question"]
            assert back["options"] == [{"id": o["id"], "text": o["text"], "value": o["value"]}
                                       for o in original["options"]]
            assert case.targets[question.id].probabilities == pytest.approx(original["target"])
            assert back["gold"] == original["gold"]
            kind = case.targets[question.id].kind
            assert kind == ("hard" if max(original["target"].values()) == 1.0 else "soft")
            seen_soft += kind == "soft"
            seen_hard += kind == "hard"
    assert seen_soft > 0 and seen_hard > 0  # count from level 2 on has soft targets


def test_many_option_benchmark_extends_larger_deterministically(bench, questions):
    definitions = load_benchmarks(bench / "benchmarks")
    many = load_cases(bench, definitions["larger-many-choice-test-v1"])
    larger = {c.case_id for c in load_cases(bench, definitions["larger-choice-test-v1"])}
    assert {c.case_id.removesuffix("-x12") for c in many} == larger
    for case in many:
        (q,) = case.questions
        numbers = [int(o.description) for o in q.options]
        assert len(numbers) == 12 == len(set(numbers))
        best = q.options[numbers.index(max(numbers))].id
        assert case.targets[q.id].probabilities[best] == 1.0
    again = synthetic.build_synthetic([q for q in questions], category="synthetic-v1", seed=7, max_cases=15)
    assert synthetic.write_synthetic(bench.parent / "again", again) == read_json(bench / "index.json")["files"]


# ---------------------------------------------------------------- the s1mb stage

def test_stage_writes_verifiable_results_and_metrics(run, bench):
    definitions = load_benchmarks(bench / "benchmarks")
    folders = load_results_dir(run["out"])
    assert sorted(folders) == ["pipeline__tiny", "pipeline__tiny-routed"]
    folder = load_model_folder(run["out"] / "pipeline__tiny")
    assert sorted(folder.results) == FAMILY_BENCHMARKS
    for bid, result in folder.results.items():
        verify_result(result, load_cases(bench, definitions[bid]), definitions[bid])  # metrics to 1e-8
        assert result["status"] == "complete" and result["provenance"] == "measured"
        assert result["environment"]["dataset_source"]["revision"] == read_json(bench / "index.json")[
            "dataset_source"]["revision"]
        assert result["model"]["settings"]["temperatures"] == {"noul": 2.0, "choice": 1.0, "score": 1.5}
    many = folder.results["larger-many-choice-test-v1"]["model"]["settings"]["many_options"]
    assert many["chunked_questions"] == definitions["larger-many-choice-test-v1"].decision_count
    assert many["max_chunks"] == 2 and many["chunk_size"] == 8
    m = run["metrics"]
    assert {"task_avg", "task_scores", "task_avg_routed", "task_scores_routed", "route_fraction", "temperatures",
            "routed_questions", "routed_parsed", "n_benchmarks", "n_judgments"} <= set(m)
    assert m["temperatures"] == {"noul": 2.0, "choice": 1.0, "score": 1.5}
    for key in ("task_scores", "task_scores_routed"):
        assert set(m[key]) == {"noul", "choice", "score"}
        assert all(v is None or 0.0 <= v <= 1.0 for v in m[key].values())
    assert m["task_avg"] == pytest.approx(sum(m["task_scores"].values()) / 3)
    assert m["n_benchmarks"] == 5
    assert m["n_judgments"] == sum(definitions[b].decision_count for b in FAMILY_BENCHMARKS)
    # no cohort configured: the three reference scorers still form one, so Borda exists in every run
    assert m["cohort"] == ["reference__label-prior", "reference__majority", "reference__uniform"]
    assert m["cohort_size"] == 4 and m["borda"] is not None and 1 <= m["rank"] <= 4
    for key, avg, per_task in (("cis", "task_avg", "task_scores"), ("cis_routed", "task_avg_routed", "task_scores_routed")):
        ci = m[key]
        assert ci["n_resamples"] == 20 and ci["task_avg"]["point"] == pytest.approx(m[avg])
        for t, v in m[per_task].items():
            assert ci["task_scores"][t]["point"] == v
            if ci["task_scores"][t]["ci_low"] is not None:
                assert ci["task_scores"][t]["ci_low"] <= ci["task_scores"][t]["ci_high"]


def test_result_bytes_are_the_same_on_another_kernel_and_python(bench, tiny_dir, tmp_path, monkeypatch):
    """Issue 54: a fresh `make run` on another machine changed the three data/s1mb/{base,sft,rl} hashes in
    dvc.lock because every result file held platform.platform() and the Python version. Two runs under two
    faked machines must write byte-identical model folders and metrics; the machine goes to the run-local
    timings file (data/timings/, outside DVC's hashes) instead."""
    import platform

    from stages import s1mb

    machines = (("Linux-5.10.0-28-amd64-x86_64-with-glibc2.31", "3.11.2"),
                ("Linux-6.8.0-49-generic-x86_64-with-glibc2.39", "3.11.9"))
    temps = temps_file(tmp_path, CALIBRATED)
    written = []
    for i, (plat, version) in enumerate(machines):
        monkeypatch.setattr(platform, "platform", lambda plat=plat: plat)
        monkeypatch.setattr(platform, "python_version", lambda version=version: version)
        out, metrics, timings = tmp_path / f"out{i}", tmp_path / f"m{i}.json", tmp_path / f"t{i}.json"
        rc = s1mb.main(["tiny", "--params", str(params(tmp_path, route_fraction=0.5)), "--data", str(bench),
                        "--model-dir", tiny_dir, "--temps", str(temps), "--out", str(out), "--metrics", str(metrics),
                        "--timings", str(timings)])
        assert rc == 0
        files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
        assert len(files) == 2 * (len(FAMILY_BENCHMARKS) + 1)  # two folders: metadata + one result per benchmark
        written.append((files, metrics.read_bytes()))
        record = json.loads(timings.read_text())
        assert (record["platform"], record["python"], record["machine_dependent"]) == (plat, version, True)
    assert written[0] == written[1]


def test_route_fraction_zero_gives_routed_scores_equal_to_readout(run):
    m = run["metrics"]
    assert m["route_fraction"] == 0.0 and m["routed_questions"] == 0 == m["routed_parsed"]
    assert m["task_avg_routed"] == m["task_avg"] and m["task_scores_routed"] == m["task_scores"]
    assert predictions(run["out"], "pipeline__tiny-routed") == predictions(run["out"], "pipeline__tiny")


def test_calibrated_temperatures_change_the_scores_of_their_tasks_only(run, routed_run):
    """noul/score were calibrated (T 2.0, 1.5), choice not: only noul and score answers and metrics move."""
    calibrated, plain = predictions(run["out"], "pipeline__tiny"), predictions(routed_run["out"], "pipeline__tiny")
    for bid in FAMILY_BENCHMARKS:
        if "-choice-" in bid:
            assert calibrated[bid] == plain[bid], bid
        else:
            assert all(calibrated[bid][k] != pytest.approx(plain[bid][k]) for k in plain[bid]), bid
    cal_results = load_model_folder(run["out"] / "pipeline__tiny").results
    plain_results = load_model_folder(routed_run["out"] / "pipeline__tiny").results
    for bid, key in (("keyword-noul-test-v1", "binary_brier"),
                     ("count-score-test-v1", "normalized_expected_score_mae")):
        assert cal_results[bid]["metrics"][key] != pytest.approx(plain_results[bid]["metrics"][key]), bid
    assert plain_results["count-score-test-v1"]["model"]["settings"]["temperatures"] == {
        "noul": 1.0, "choice": 1.0, "score": 1.0}


def test_routing_reanswers_only_routed_questions_of_the_same_readout(routed_run, bench):
    m, out = routed_run["metrics"], routed_run["out"]
    definitions = load_benchmarks(bench / "benchmarks")
    eligible = {b: 0 if b == "larger-many-choice-test-v1" else definitions[b].decision_count for b in FAMILY_BENCHMARKS}
    assert m["route_fraction"] == 0.5
    assert m["routed_questions"] == sum(int(n * 0.5 + 0.5) for n in eligible.values()) > 0  # chunked: never routed
    readout, routed = predictions(out, "pipeline__tiny"), predictions(out, "pipeline__tiny-routed")
    changed = sum(readout[b][k] != routed[b][k] for b in readout for k in readout[b])
    # a routed question takes the post-chain readout (closed chain) or the parsed letter's 1-eps fallback
    assert changed == m["routed_post_chain"] + m["routed_one_hot_fallback"] <= m["routed_questions"]
    results = load_model_folder(out / "pipeline__tiny-routed").results
    for bid, result in results.items():
        verify_result(result, load_cases(bench, definitions[bid]), definitions[bid])
        routing = result["model"]["settings"]["routing"]
        assert routing["method"] == "lowest-margin-thinking-post-chain-v2" and routing["routed"] == int(eligible[bid] * 0.5 + 0.5)
    if m["routed_post_chain"] + m["routed_one_hot_fallback"] == 0:
        assert m["task_avg_routed"] == m["task_avg"]
    assert m["task_avg_routed"] == pytest.approx(sum(m["task_scores_routed"].values()) / 3)


def informative(monkeypatch, sharpness: float, think: bool = False) -> None:
    """Make the tiny model's readout lean towards the target (logits = sharpness * p_target) and, with
    `think`, its thinking chains answer the gold option: S1MB scores above 0 that temperature and routing move."""
    import numpy as np

    def readout(model, tok, questions, batch_size=32):
        return [np.array([sharpness * q.get("target", {}).get(o["id"], 0.0) for o in q["options"]]) for q in questions]

    def thinking(backend, model, tok, questions, settings, batch_size=32):
        return [{"thinking_pred": [o["id"] for o in q["options"]].index(q["gold"])} for q in questions]

    monkeypatch.setattr("decision_pipeline.decision.evaluate.answering.readout", readout)
    if think:
        monkeypatch.setattr("decision_pipeline.decision.evaluate.answering.thinking", thinking)


def test_calibrated_score_temperature_changes_the_task_scores(bench, tiny_dir, tmp_path, monkeypatch):
    """T only moves scores through probabilities: score (expectation over values) moves; choice (argmax)
    and noul (adjusted from balanced accuracy at p >= 0.5) cannot."""
    informative(monkeypatch, sharpness=4.0)
    plain = run_stage(tmp_path, bench, tiny_dir, "t1", temps_file(tmp_path, {"readout": {}}, "t1.json"))["metrics"]
    calibrated = run_stage(tmp_path, bench, tiny_dir, "cal", temps_file(tmp_path, {"readout": {"score": 3.0}}))
    m = calibrated["metrics"]
    assert all(v > 0 for v in plain["task_scores"].values())                 # the scores are informative
    assert m["task_scores"]["score"] != pytest.approx(plain["task_scores"]["score"], abs=1e-6)
    assert m["task_scores"]["choice"] == plain["task_scores"]["choice"]
    assert m["task_scores"]["noul"] == plain["task_scores"]["noul"]
    assert m["task_avg"] != pytest.approx(plain["task_avg"], abs=1e-6)
    assert m["task_avg_routed"] == m["task_avg"] and m["task_scores_routed"] == m["task_scores"]  # nothing routed


def test_routed_scores_reuse_the_readout_and_reanswer_the_routed_questions(bench, tiny_dir, tmp_path, monkeypatch):
    informative(monkeypatch, sharpness=1.0, think=True)
    temps = temps_file(tmp_path, {"readout": {"score": 2.0}})
    unrouted = run_stage(tmp_path, bench, tiny_dir, "r0", temps)["metrics"]
    routed = run_stage(tmp_path, bench, tiny_dir, "r3", temps, route_fraction=0.3)
    m = routed["metrics"]
    assert m["routed_questions"] > 0 and m["routed_parsed"] == m["routed_questions"]
    # the readout-only numbers of the routed run are those of a run without routing: one readout, reused
    assert (m["task_avg"], m["task_scores"]) == (unrouted["task_avg"], unrouted["task_scores"])
    assert m["task_avg_routed"] > m["task_avg"]                                # thinking answered the gold option
    assert unrouted["task_avg_routed"] == unrouted["task_avg"]
    readout = predictions(routed["out"], "pipeline__tiny")
    assert readout == predictions(tmp_path / "r0", "pipeline__tiny")
    routed_preds = predictions(routed["out"], "pipeline__tiny-routed")
    assert sum(readout[b][k] != routed_preds[b][k] for b in readout for k in readout[b]) == m["routed_questions"]


@pytest.mark.parametrize("doc, problem", [
    (None, "file not found"),
    ("{oops", "not valid JSON"),
    ({"post_chain": {}}, "'readout' object"),
    ({"readout": {"score": 0.0}}, "readout.score: temperature must be a finite number > 0"),
])
def test_missing_or_malformed_temperatures_is_one_error_line(bench, tmp_path, capsys, doc, problem):
    from stages import s1mb
    path = tmp_path / "calibrate" / "missing.json" if doc is None else temps_file(tmp_path, doc)
    rc = s1mb.main(["tiny", "--params", str(params(tmp_path)), "--data", str(bench), "--model-dir",
                    str(tmp_path / "no-model"), "--temps", str(path), "--out", str(tmp_path / "out"),
                    "--metrics", str(tmp_path / "m.json")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and err.startswith(f"error: {path}") and problem in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "m.json").exists()


def fake_folder(root: Path, bench: Path, name: str, perfect: bool) -> None:
    """A published-style model folder with deterministic predictions (targets, or uniform)."""
    definitions = load_benchmarks(bench / "benchmarks")
    results = []
    for bid in FAMILY_BENCHMARKS:
        cases = load_cases(bench, definitions[bid])
        preds = [Prediction(c.case_id, q.id, dict(c.targets[q.id].probabilities) if perfect
                            else {o: 1 / len(q.option_ids) for o in q.option_ids})
                 for c in cases for q in c.questions]
        results.append(build_result(definitions[bid], cases, preds, run_id=name, created_at="2025-01-01T00:00:00",
                                    model={"id": name, "adapter": "fake", "revision": "r"},
                                    environment={"dataset_source": {"repo_id": "x/y", "revision": "0" * 40}}))
    write_model_folder(root, {"model_id": f"org__{name}", "display_name": name, "short_name": name}, results)


def test_cohort_gives_borda_and_rank(run, bench, tiny_dir):
    tmp = bench.parent
    cohort = tmp / "cohort"
    fake_folder(cohort, bench, "perfect", True)
    fake_folder(cohort, bench, "uniform", False)
    m = run_stage(tmp, bench, tiny_dir, "tiny2", temps_file(tmp, CALIBRATED), cohort_dir=str(cohort))["metrics"]
    assert m["cohort_size"] == 6  # 3 reference scorers + 2 folders; each variant joins the cohort alone
    assert m["borda"] is not None and 0.0 <= m["borda"] < 1.0
    assert 2 <= m["rank"] <= 6  # the perfect model scores 1 everywhere and cannot be beaten
    assert m["borda_routed"] == m["borda"] and m["rank_routed"] == m["rank"]  # nothing routed: same answers
    # the same number from the library directly, over the cohort plus the written folder
    definitions = load_benchmarks(bench / "benchmarks")
    shutil.copytree(tmp / "tiny2" / "pipeline__tiny", cohort / "pipeline__tiny")
    from decision_pipeline.bench.cohort import reference_scores
    from decision_pipeline.bench.noise import Scored
    from decision_pipeline.bench.s1mb import benchmark_decisions
    refs = reference_scores([Scored(b, definitions[b].task, benchmark_decisions(definitions[b], load_cases(bench, definitions[b])), [])
                             for b in FAMILY_BENCHMARKS])
    points = borda({**refs, **cohort_scores(load_results_dir(cohort), definitions)},
                   category_tasks(FAMILY_BENCHMARKS, definitions))
    assert points["pipeline__tiny"] == pytest.approx(m["borda"], abs=1e-12)
    assert points["org__perfect"] == max(points.values())
    assert m["task_scores"] == run["metrics"]["task_scores"]  # the cohort does not change our own scores


def test_cohort_folder_missing_a_benchmark_is_one_line_and_writes_nothing(bench, tiny_dir, tmp_path, capsys):
    from stages import s1mb
    cohort = tmp_path / "cohort"
    fake_folder(cohort, bench, "partial", False)
    (cohort / "org__partial" / "keyword-noul-test-v1.json.xz").unlink()
    rc = s1mb.main(["tiny", "--params", str(params(tmp_path, cohort_dir=str(cohort))), "--data", str(bench),
                    "--model-dir", tiny_dir, "--temps", str(temps_file(tmp_path, CALIBRATED)),
                    "--out", str(tmp_path / "out"), "--metrics", str(tmp_path / "m.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "org__partial: no result for benchmark 'keyword-noul-test-v1' (1 of 5 missing)" in err[0]
    assert not (tmp_path / "out").exists() and not (tmp_path / "m.json").exists()


def test_reference_scorers_by_hand():
    from decision_pipeline.bench.cohort import reference_predictions
    from decision_pipeline.bench.s1mb.records import Decision
    ds = [Decision("c0", "q", ("a", "b", "c"), {"a": 1.0}), Decision("c1", "q", ("a", "b", "c"), {"a": 0.5, "b": 0.5}),
          Decision("c2", "q", ("x", "y"), {"y": 1.0})]
    uni, prior, major = (reference_predictions(k, ds) for k in ("uniform", "label-prior", "majority"))
    assert uni[0].probabilities == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert prior[1].probabilities == pytest.approx({"a": 0.75, "b": 0.25, "c": 0.0})   # mean of the 3-option targets
    assert prior[2].probabilities == pytest.approx({"x": 0.0, "y": 1.0})
    assert major[0].probabilities == {"a": 1.0, "b": 0.0, "c": 0.0}


def test_make_cohort_exports_the_run_folders(tmp_path):
    from decision_pipeline.bench.cohort import main
    for m in ("base", "sft"):
        for v in ("", "-routed"):
            d = tmp_path / "s1mb" / m / f"pipeline__{m}{v}"
            d.mkdir(parents=True)
            (d / "metadata.json").write_text("{}")
    assert main(["--from", str(tmp_path / "s1mb"), "--out", str(tmp_path / "cohort"), "--models", "base", "sft"]) == 0
    assert sorted(p.name for p in (tmp_path / "cohort").iterdir()) == [
        "pipeline__base", "pipeline__base-routed", "pipeline__sft", "pipeline__sft-routed"]
    assert main(["--from", str(tmp_path / "s1mb"), "--out", str(tmp_path / "cohort"), "--models", "rl"]) == 2


# ---------------------------------------------------------------- local source and errors

def test_local_export_is_validated_indexed_and_guarded(bench, tmp_path):
    from stages import s1mb_data
    export = tmp_path / "export"
    for part in ("benchmarks", "categories", "datasets"):
        shutil.copytree(bench / part, export / part)
    p = params(tmp_path, source="local", local_dir=str(export))
    assert s1mb_data.main(["--params", str(p), "--items", "unused-for-local", "--out", str(tmp_path / "out"),
                           "--metrics", str(tmp_path / "m.json")]) == 0
    index, root = load_index(tmp_path / "out")
    assert index["source"] == "local" and root == export.resolve()
    assert index["n_benchmarks"] == 5 and len(index["dataset_source"]["revision"]) == 40
    copied = sorted(p.name for p in (tmp_path / "out" / "benchmarks").iterdir())
    assert copied == [f"{b}.json" for b in FAMILY_BENCHMARKS]
    data = export / "datasets" / "keyword" / "test" / "data.jsonl"
    data.write_text(data.read_text().replace('"hard"', '"soft"', 1))
    with pytest.raises(PipelineError, match="changed since s1mb_data"):
        load_index(tmp_path / "out")
    # a broken row is reported by the stage as one error line (exit code 2), not a traceback
    data.write_text(data.read_text().replace('"probabilities": [', '"probabilities": [0.5, ', 1))
    assert s1mb_data.main(["--params", str(p), "--items", "unused-for-local", "--out", str(tmp_path / "out"),
                           "--metrics", str(tmp_path / "m.json")]) == 2


def test_bad_params_are_pipeline_errors(tmp_path):
    from decision_pipeline.common.params import load_section
    with pytest.raises(PipelineError, match="local_dir"):
        load_section(S1mbDataParams, "s1mb_data", params(tmp_path, source="local"))
    with pytest.raises(PipelineError, match="category"):
        load_section(S1mbDataParams, "s1mb_data", params(tmp_path, category="bad id!"))
    with pytest.raises(PipelineError, match="many_options"):
        load_section(S1mbDataParams, "s1mb_data", params(tmp_path, many_options=8))


def test_competition_rank_shares_ties_and_skips_unranked():
    points = {"a": 0.9, "b": 0.5, "c": 0.5, "d": None, "e": 0.1}
    assert [competition_rank(points, m) for m in "abcde"] == [1, 2, 2, None, 4]
    assert competition_rank(points, "missing") is None


def test_model_revision_is_the_shared_weights_fingerprint(tmp_path):
    """Names and bytes of config and weights count; tokenizer files and other files do not."""
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "tokenizer.json").write_text("{}")
    first = model_revision(tmp_path)
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 16
    (tmp_path / "tokenizer.json").write_text('{"changed": 1}')
    assert model_revision(tmp_path) == first
    (tmp_path / "model.safetensors").write_bytes(b"weightz")
    assert model_revision(tmp_path) != first

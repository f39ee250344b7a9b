"""Result files (§3.4): build, strict JSON, .json.xz round trip, verification, model folders."""
import copy
import json
import lzma

import pytest
from tests.bench.s1mb_helpers import definition, mixed_row

from decision_pipeline.bench.s1mb import (
    METRIC_KEYS, Prediction, S1MBError, build_result, case_from_row, cohort_scores, leaderboard,
    category_tasks, load_model_folder, load_results_dir, read_json, read_result, summarize_result,
    verify_result, write_json, write_model_folder, write_result,
)

MODEL = {"id": "org/model", "adapter": "hf", "revision": "abc"}
SOURCE = {"dataset_source": {"repo_id": "hotchpotch/s1mb-dataset", "revision": "a" * 40}}
DEFS = {"s-noul-test-v1": definition("s-noul-test-v1", "noul", 4, 4),
        "s-choice-test-v1": definition("s-choice-test-v1", "choice", 4, 4),
        "s-score-test-v1": definition("s-score-test-v1", "score", 4, 4)}


@pytest.fixture
def cases():
    return [case_from_row(mixed_row(f"c{i}", t_true=float(i % 2), label="ab"[i // 2], hi=i / 3)) for i in range(4)]


def noul_predictions(p_true=(0.9, 0.2, 0.6, 0.4), failed=()):
    return [Prediction(f"c{i}", "relevant", error="TimeoutError") if i in failed
            else Prediction(f"c{i}", "relevant", {"false": 1 - p, "true": p}) for i, p in enumerate(p_true)]


def build(cases, predictions, bench="s-noul-test-v1", **kw):
    return build_result(DEFS[bench], cases, predictions, run_id="run-1", model=MODEL,
                        created_at="2025-01-01T00:00:00+00:00", environment=SOURCE, **kw)


def test_build_result_fills_counts_status_metrics_and_hashes(cases):
    result = build(cases, noul_predictions())
    assert list(result) == ["format_version", "run_id", "benchmark", "model", "created_at", "evaluator_version",
                            "provenance", "status", "counts", "metrics", "elapsed_seconds", "environment",
                            "predictions"]
    assert result["status"] == "complete" and result["provenance"] == "measured"
    assert result["counts"] == {"cases": 4, "expected": 4, "succeeded": 4, "failed": 0}
    assert list(result["metrics"]) == list(METRIC_KEYS["noul"])
    # targets t(true) = 0,1,0,1; predictions .9,.2,.6,.4 -> all four wrong: BA 0
    assert result["metrics"]["balanced_accuracy"] == 0 and result["metrics"]["baseline_adjusted_score"] == 0
    assert result["environment"]["input_hashes"] == {f"c{i}": f"h-c{i}" for i in range(4)}
    assert result["model"]["total_params"] is None and result["model"]["settings"] == {}
    partial = build(cases, noul_predictions()[:2] + noul_predictions(failed=(2,))[2:3])
    assert partial["status"] == "partial"
    assert partial["counts"] == {"cases": 3, "expected": 4, "succeeded": 2, "failed": 1}


def test_machine_false_leaves_the_python_version_and_platform_out(cases, monkeypatch):
    """The pipeline's results are DVC outputs: only upstream's default shape records the machine."""
    import platform

    monkeypatch.setattr(platform, "platform", lambda: "Linux-9.9-test")
    monkeypatch.setattr(platform, "python_version", lambda: "3.99.0")
    assert {k: build(cases, noul_predictions())["environment"].get(k) for k in ("python", "platform")} == \
        {"python": "3.99.0", "platform": "Linux-9.9-test"}
    env = build(cases, noul_predictions(), machine=False)["environment"]
    assert sorted(env) == ["dataset_source", "input_hashes"]


def test_round_trip_through_json_xz(tmp_path, cases):
    result = build(cases, noul_predictions(failed=(3,)))
    path = write_result(tmp_path / "org__model" / "s-noul-test-v1.json.xz", result)
    text = lzma.decompress(path.read_bytes()).decode()
    assert text == json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    loaded = read_result(path)
    assert loaded == result
    verify_result(loaded, cases, DEFS["s-noul-test-v1"])


def test_verification_recomputes_metrics_and_checks_hashes_and_ids(cases):
    result = build(cases, noul_predictions())
    tampered = copy.deepcopy(result)
    tampered["metrics"]["binary_brier"] += 2e-8
    with pytest.raises(S1MBError, match="binary_brier=.* differs from recomputed"):
        verify_result(tampered, cases)
    close = copy.deepcopy(result)
    close["metrics"]["binary_brier"] += 5e-9  # within 1e-8 is accepted
    verify_result(close, cases)
    wrong_hash = copy.deepcopy(result)
    wrong_hash["environment"]["input_hashes"]["c0"] = "other"
    with pytest.raises(S1MBError, match="input_hashes"):
        verify_result(wrong_hash, cases)
    unknown = copy.deepcopy(result)
    unknown["predictions"][0]["question_id"] = "label"
    with pytest.raises(S1MBError, match="not in the benchmark"):
        verify_result(unknown, cases)
    wrong_status = copy.deepcopy(result)
    wrong_status["status"] = "partial"
    with pytest.raises(S1MBError, match="status 'partial' is inconsistent"):
        verify_result(wrong_status, cases)


def test_strict_json_rejects_nan_infinity_and_duplicate_keys(tmp_path, cases):
    result = build(cases, noul_predictions())
    bad = copy.deepcopy(result)
    bad["metrics"]["accuracy"] = float("nan")
    with pytest.raises(S1MBError, match="finite"):
        write_result(tmp_path / "x.json.xz", bad)
    with pytest.raises(S1MBError, match="non-finite"):
        write_json(tmp_path / "y.json", {"a": float("inf")})
    assert not list(tmp_path.iterdir())  # nothing half-written
    for text, problem in [('{"a": NaN}', "non-finite"), ('{"a": -Infinity}', "non-finite"),
                          ('{"a": 1e999}', "non-finite"), ('{"a": 1, "a": 2}', "duplicate JSON key 'a'")]:
        path = tmp_path / "bad.json.xz"
        path.write_bytes(lzma.compress(text.encode()))
        with pytest.raises(S1MBError, match=problem) as err:
            read_json(path)
        assert "bad.json.xz" in str(err.value)
    path.write_bytes(lzma.compress(b'{"ok": true}')[:-4])
    with pytest.raises(S1MBError, match="truncated"):
        read_json(path)


def test_schema_rejects_extra_fields_and_wrong_metric_keys(tmp_path, cases):
    result = build(cases, noul_predictions())
    for change, problem in [(lambda r: r.update(extra=1), "unexpected \\['extra'\\]"),
                            (lambda r: r["metrics"].pop("f1"), "metric keys"),
                            (lambda r: r["counts"].update(cases=-1), "counts"),
                            (lambda r: r["model"].update(adapter="dummy"), "dummy"),
                            (lambda r: r["predictions"][0].update(error="E"), "exactly one")]:
        bad = copy.deepcopy(result)
        change(bad)
        with pytest.raises(S1MBError, match=problem):
            write_result(tmp_path / "r.json", bad)


def test_summary_uses_stored_baselines_and_checks_consistency(cases):
    result = build(cases, noul_predictions((0.9, 0.2, 0.1, 0.8)))  # right on c1, c3 -> BA .5
    score = summarize_result(result)
    assert (score.task, score.eligible, score.complete, score.demo) == ("noul", True, True, False)
    assert score.adjusted == 0
    bad = copy.deepcopy(result)
    bad["metrics"]["baseline_adjusted_score"] = 0.25
    with pytest.raises(S1MBError, match="inconsistent with the stored metrics"):
        summarize_result(bad)
    one_class = [case_from_row(mixed_row(f"c{i}", t_true=1.0)) for i in range(4)]
    saturated = build(one_class, noul_predictions())
    assert saturated["metrics"]["baseline_adjusted_score"] is None
    assert summarize_result(saturated).eligible is False
    demo = build(cases, noul_predictions(), provenance="demo")
    assert summarize_result(demo).complete is False and summarize_result(demo).demo is True
    with pytest.raises(S1MBError, match="task 'noul' differs"):
        summarize_result(result, definition("s-noul-test-v1", "choice", 4, 4))


def test_model_folders_import_as_a_cohort(tmp_path, cases):
    root = tmp_path / "hub"
    choice_preds = lambda picks: [Prediction(f"c{i}", "label", {"b": 1.0 - p, "a": p}) for i, p in enumerate(picks)]
    score_preds = lambda his: [Prediction(f"c{i}", "quality", {"lo": 1.0 - h, "hi": h}) for i, h in enumerate(his)]
    for name, p_true, picks, his in [("org__good", (0.1, 0.9, 0.2, 0.8), (1, 1, 0, 0), (0, 1 / 3, 2 / 3, 1)),
                                     ("org__bad", (0.9, 0.1, 0.8, 0.2), (0, 0, 1, 1), (1, 1, 0, 0))]:
        results = [build(cases, noul_predictions(p_true)),
                   build(cases, choice_preds(picks), bench="s-choice-test-v1"),
                   build(cases, score_preds(his), bench="s-score-test-v1")]
        write_model_folder(root, {"model_id": name, "display_name": name, "short_name": name}, results)
    (root / "viewer-summary.json").write_text("{}")
    folders = load_results_dir(root)
    assert sorted(folders) == ["org__bad", "org__good"]
    assert sorted(folders["org__good"].results) == sorted(DEFS)
    cohort = cohort_scores(folders, DEFS)
    assert cohort["org__good"]["s-noul-test-v1"].adjusted == 1
    assert cohort["org__good"]["s-score-test-v1"].adjusted == pytest.approx(1)
    assert cohort["org__bad"]["s-choice-test-v1"].adjusted == 0
    board = leaderboard(cohort, category_tasks(list(DEFS), DEFS))
    assert board["org__good"]["task_avg"] == pytest.approx(1) and board["org__bad"]["task_avg"] == 0
    assert board["org__good"]["borda"] == 1 and board["org__bad"]["borda"] == 0
    # Without a score benchmark in the category, Task Avg is null and nobody enters the Borda cohort.
    two = category_tasks(["s-noul-test-v1", "s-choice-test-v1"], DEFS)
    assert leaderboard(cohort, two)["org__good"] == {
        "task_avg": None, "task_scores": {"noul": 1.0, "choice": 1.0, "score": None}, "borda": None}


def test_model_folder_rejects_bad_metadata_and_stray_files(tmp_path, cases):
    folder = write_model_folder(tmp_path, {"model_id": "org__m", "display_name": "M", "short_name": "M"},
                                [build(cases, noul_predictions())])
    (folder / "notes.txt").write_text("hi")
    with pytest.raises(S1MBError, match="unexpected file"):
        load_model_folder(folder)
    (folder / "notes.txt").unlink()
    (folder / "s-noul-test-v1.json.xz").rename(folder / "s-choice-test-v1.json.xz")
    with pytest.raises(S1MBError, match="differs from benchmark id"):
        load_model_folder(folder)
    write_json(folder / "metadata.json", {"model_id": "org__other", "display_name": "M", "short_name": "M"})
    with pytest.raises(S1MBError, match="differs from folder name"):
        load_model_folder(folder)
    with pytest.raises(S1MBError, match="http"):
        write_model_folder(tmp_path, {"model_id": "org__m", "display_name": "M", "short_name": "M",
                                      "url": "javascript:alert(1)"}, [])

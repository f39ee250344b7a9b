"""``python -m decision_pipeline.bench.s1mb`` run as a subprocess, as the pipeline and users run it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.bench.s1mb import METRIC_KEYS

ROOT = Path(__file__).resolve().parents[2]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "decision_pipeline.bench.s1mb", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def judgment(bench, task, case, target, prediction, options=None, question="q"):
    options = options or [{"id": k} for k in target]
    return {"benchmark": bench, "task": task, "case_id": case, "question_id": question,
            "options": options, "target": target, "prediction": prediction}


def noul_line(case, t, p, bench="demo-noul-test-v1"):
    pred = None if p is None else {"false": 1 - p, "true": p}
    return judgment(bench, "noul", case, {"false": 1 - t, "true": t}, pred)


def write_lines(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_metrics_subcommand_scores_each_benchmark(tmp_path):
    lines = ([noul_line("c0", 1, 1)] + [noul_line(f"c{i}", 1, 0) for i in range(1, 11)]
             + [noul_line(f"c{i}", 0, 0) for i in range(11, 100)] + [noul_line("c100", 0, None)])
    scale = [{"id": "lo", "value": 1}, {"id": "mid", "value": 2}, {"id": "hi", "value": 5}]
    lines += [judgment("demo-score-test-v1", "score", "s1", {"lo": 1, "mid": 0, "hi": 0},
                       {"lo": 0, "mid": 1, "hi": 0}, scale),
              judgment("demo-score-test-v1", "score", "s2", {"lo": 0, "mid": 0, "hi": 1},
                       {"lo": 0, "mid": 0, "hi": 1}, scale)]
    lines += [judgment("demo-choice-test-v1", "choice", "k1", {"a": 0, "b": 1}, {"a": 0.5, "b": 0.5}),
              judgment("demo-choice-test-v1", "choice", "k2", {"b": 1, "a": 0}, {"b": 0.5, "a": 0.5})]
    done = cli("metrics", write_lines(tmp_path / "j.jsonl", lines))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert list(out) == ["demo-noul-test-v1", "demo-score-test-v1", "demo-choice-test-v1"]
    noul = out["demo-noul-test-v1"]
    assert list(noul) == list(METRIC_KEYS["noul"])
    assert noul["accuracy"] == pytest.approx(0.9) and noul["baseline_adjusted_score"] == pytest.approx(1 / 11)
    assert noul["positive_prevalence"] == pytest.approx(11 / 101)  # the failed line is still in D
    score = out["demo-score-test-v1"]
    assert list(score) == list(METRIC_KEYS["score"])
    assert score["normalized_expected_score_mae"] == pytest.approx(0.25 / 2)  # |2 - 1| / 4 on s1
    assert score["constant_score_baseline"] == 0.5 and score["baseline_adjusted_score"] == pytest.approx(0.75)
    choice = out["demo-choice-test-v1"]
    assert choice["target_mass_at_prediction"] == 0.5  # ties go to the first authored option: a, then b
    assert choice["fixed_answer_accuracy_baseline"] == 1  # always answering id "b" is always right
    assert choice["baseline_adjusted_skill"] is None and choice["baseline_adjusted_score"] is None


@pytest.mark.parametrize("bad, problem", [
    ("{not json", "invalid JSON"),
    ('{"benchmark": "b", "task": "noul", "case_id": "c", "question_id": "q", "options": [{"id": "false"},'
     ' {"id": "true"}], "target": {"false": 0, "true": 1}, "prediction": {"false": NaN, "true": 1}}',
     "non-finite"),
    (judgment("b", "noul", "c", {"false": 0, "true": 1}, {"no": 0, "yes": 1}),
     "case 'c' question 'q': prediction keys ['no','yes'] differ from option ids ['false','true']"),
    (judgment("b", "noul", "c", {"false": 0, "true": 1}, {"false": -0.5, "true": 1.5}), "outside [0, 1]"),
    (judgment("b", "noul", "c", {"false": 0, "true": 1}, {"false": 0.5, "true": 0.6}), "not within 1e-5"),
    (judgment("b", "rank", "c", {"false": 0, "true": 1}, None), "unknown task 'rank'"),
    (judgment("b", "score", "c", {"x": 0, "y": 1}, None), "no numeric value"),
    (noul_line("c0", 1, 1, bench="b"), "duplicate judgment"),
])
def test_metrics_bad_input_exits_2_with_file_and_line(tmp_path, bad, problem):
    path = write_lines(tmp_path / "bad.jsonl", [noul_line("c0", 1, 1, bench="b"), bad])
    done = cli("metrics", path)
    assert done.returncode == 2
    assert done.stdout == ""
    message = done.stderr.strip()
    assert message.startswith(f"{path}:2: ") and problem in message and "\n" not in message


def test_aggregate_subcommand_prints_task_scores_task_avg_and_borda(tmp_path):
    table = {
        "alpha": {"n1": {"task": "noul", "adjusted": 0.6}, "c1": {"task": "choice", "adjusted": 0.9},
                  "s1": {"task": "score", "adjusted": 0.3},
                  "n2": {"task": "noul", "adjusted": None, "eligible": False}},
        "beta": {"n1": {"task": "noul", "adjusted": 0.2}, "c1": {"task": "choice", "adjusted": 0.9},
                 "s1": {"task": "score", "adjusted": 0.5}, "n2": {"task": "noul", "adjusted": 0.1}},
        "gamma": {"n1": {"task": "noul", "adjusted": 0.9}, "c1": {"task": "choice", "adjusted": 0.9},
                  "s1": {"task": "score", "adjusted": 0.5, "complete": False},
                  "n2": {"task": "noul", "adjusted": 0.1}},
    }
    path = tmp_path / "table.json"
    path.write_text(json.dumps(table))
    done = cli("aggregate", path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["alpha"]["task_scores"] == pytest.approx({"noul": 0.6, "choice": 0.9, "score": 0.3})
    assert out["alpha"]["task_avg"] == pytest.approx(0.6)
    assert out["beta"]["task_scores"]["noul"] == pytest.approx(0.15)
    assert out["gamma"]["task_scores"]["score"] is None and out["gamma"]["task_avg"] is None
    # alpha's ineligible n2 makes Borda unavailable for the whole cohort (alpha, beta).
    assert [out[m]["borda"] for m in ("alpha", "beta", "gamma")] == [None, None, None]
    del table["alpha"]["n2"]["eligible"]
    table["alpha"]["n2"]["adjusted"] = 0.1
    path.write_text(json.dumps(table))
    out = json.loads(cli("aggregate", path).stdout)
    # n1: alpha 1, beta 0; c1: tie .5/.5; s1: beta 1, alpha 0; n2: tie .5/.5
    assert out["alpha"]["borda"] == 0.5 and out["beta"]["borda"] == 0.5 and out["gamma"]["borda"] is None
    del table["beta"]["s1"]
    path.write_text(json.dumps(table))
    out = json.loads(cli("aggregate", path).stdout)
    assert out["beta"]["task_scores"]["score"] is None      # missing benchmark fails the coverage gate
    assert out["alpha"]["borda"] is None                     # cohort of one


@pytest.mark.parametrize("text, problem", [
    ('{"m": {"b": {"task": "noul", "adjusted": 0.5, "adjusted": 0.6}}}', "duplicate JSON key 'adjusted'"),
    ('{"m": {"b": {"task": "noul", "adjusted": NaN}}}', "non-finite"),
    ('{"m": {"b": {"task": "rank", "adjusted": 0.5}}}', "unknown task 'rank'"),
    ('{"m": {"b": {"task": "noul", "adjusted": 1.5}}}', "in [0, 1]"),
    ('{"m": {"b": {"task": "noul"}}}', "entry must be an object with task, adjusted"),
    ('{"m": {"b": {"task": "noul", "adjusted": 0.5}}, "n": {"b": {"task": "score", "adjusted": 0.5}}}',
     "differs from 'noul'"),
])
def test_aggregate_bad_input_exits_2(tmp_path, text, problem):
    path = tmp_path / "bad.json"
    path.write_text(text)
    done = cli("aggregate", path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith(f"{path}: ") and problem in done.stderr


def test_missing_file_is_a_one_line_error(tmp_path):
    done = cli("metrics", tmp_path / "absent.jsonl")
    assert done.returncode == 2 and "cannot read" in done.stderr and done.stderr.count("\n") == 1

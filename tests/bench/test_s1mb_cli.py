"""``python -m decision_pipeline s1mb`` run as a subprocess, as the pipeline and users run it;
then the two passes of ``metrics`` (fast column-wise, strict per-line) compared in-process."""
import gc
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.bench.s1mb import METRIC_KEYS
from decision_pipeline.bench.s1mb.cli import InputError, _metrics_fast, _metrics_strict, metrics_from_jsonl

ROOT = Path(__file__).resolve().parents[2]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "decision_pipeline", "s1mb", *map(str, args)],
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


def _good_text() -> str:
    return "".join(json.dumps(noul_line(f"c{i}", i % 2, 0.5)) + "\n" for i in range(4))


@pytest.mark.parametrize("data, problem", [
    (lambda t: t.encode().replace(b'"c2"', b'"c\xff2"'), ":3: byte 65 of the line (0xff) is not UTF-8; save the file as UTF-8"),
    (lambda t: t.encode().replace(b'"c1"', b'"c\xe91"'), ":2: byte 65 of the line (0xe9) is not UTF-8"),
    (lambda t: b"\xef\xbb\xbf" + t.encode(), ": is UTF-8 with a byte-order mark (BOM); save it as UTF-8 without"),
    (lambda t: b"\xff\xfe" + t.encode("utf-16-le"), ": is UTF-16 (little-endian) with a byte-order mark"),
    (lambda t: t.encode("utf-16-le"), ": is UTF-16 (little-endian) text; save it as UTF-8"),
], ids=["byte-ff-line-3", "latin1-line-2", "utf8-bom", "utf16-bom", "utf16"])
def test_metrics_on_a_file_that_is_not_utf8_is_one_line_naming_file_line_and_byte(tmp_path, data, problem):
    path = tmp_path / "judgments.jsonl"
    good = _good_text()
    path.write_text(good)
    assert cli("metrics", path).returncode == 0  # the same lines as UTF-8 are fine
    path.write_bytes(data(good))
    done = cli("metrics", path)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith(f"{path}{problem}"), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    located = re.match(r":(\d+): byte (\d+) ", problem)
    if located:  # the byte named is the byte that is wrong
        lineno, col = map(int, located.groups())
        assert data(good).split(b"\n")[lineno - 1][col - 1] >= 0x80


@pytest.mark.parametrize("data, problem", [
    (b'{"m": {"b": {"task": "noul", "adjusted": 0.5}},\n "\xe9": {}}', "line 2, byte 3 (0xe9) is not UTF-8"),
    (b'\xef\xbb\xbf{"m": {}}', "is UTF-8 with a byte-order mark (BOM)"),
])
def test_aggregate_on_a_file_that_is_not_utf8_names_line_and_byte(tmp_path, data, problem):
    path = tmp_path / "table.json"
    path.write_bytes(data)
    done = cli("aggregate", path)
    assert done.returncode == 2 and done.stderr.startswith(f"{path}: {problem}") and done.stderr.count("\n") == 1


# The metrics command runs a fast column-wise pass and falls back to the strict per-line
# pass (which words the error) on anything the fast pass does not accept. The fast pass
# must accept exactly what the strict pass accepts, with the same metrics.

SCALE = [{"id": "lo", "value": 1}, {"id": "mid", "value": 2.5}, {"id": "hi", "value": 5}]


def valid_lines():
    """Every accepted variant: soft targets, null predictions, reordered keys and options."""
    lines = [noul_line(f"n{i}", float(i % 3 == 0), None if i % 7 == 0 else (i % 5) / 4) for i in range(30)]
    lines.append({"prediction": {"true": 0.25, "false": 0.75}, "target": {"true": 0.4, "false": 0.6},
                  "options": [{"id": "true"}, {"id": "false"}], "question_id": "q2", "case_id": "n1",
                  "task": "noul", "benchmark": "demo-noul-test-v1"})  # keys and options in another order
    lines.append("")  # blank lines are skipped
    lines += [judgment("demo-score-test-v1", "score", f"s{i}", {"lo": 0.5, "mid": 0.25, "hi": 0.25},
                       None if i == 3 else {"lo": 0.1, "mid": 0.3, "hi": 0.6}, SCALE) for i in range(6)]
    lines += [judgment("demo-choice-test-v1", "choice", f"k{i}", {"a": 0.0, "b": 1.0, "c": 0.0},
                       {"a": 0.2, "b": 0.3, "c": 0.5}, [{"id": "a", "value": 1}, {"id": "b"}, {"id": "c", "value": None}],
                       question=f"q{i % 2}") for i in range(8)]
    return lines


def test_fast_pass_gives_the_strict_pass_metrics(tmp_path):
    path = write_lines(tmp_path / "j.jsonl", valid_lines())
    fast = _metrics_fast(path)  # raises if the fast pass refuses valid input (then it would only cost time)
    assert fast == _metrics_strict(path) == metrics_from_jsonl(path)
    assert gc.isenabled()  # the fast pass pauses the collector and must turn it back on
    assert list(fast) == ["demo-noul-test-v1", "demo-score-test-v1", "demo-choice-test-v1"]


def _base(**change):
    line = judgment("b", "noul", "c", {"false": 0.25, "true": 0.75}, {"false": 0.5, "true": 0.5})
    line.update(change)
    return line


def _text(line, old, new):
    text = json.dumps(line)
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize("bad", [
    # JSON the decoder alone would accept: duplicate keys (the dict keeps a valid value), NaN, overflow
    _text(_base(), '"true": 0.75}', '"true": 0.75, "true": 0.75}'),
    _text(_base(prediction=None), '"prediction": null', '"prediction": null, "prediction": {"false": 0, "true": 1}'),
    _text(_base(), '"false": 0.5', '"false": NaN'),
    _text(_base(), '"false": 0.5', '"false": -Infinity'),
    _text(_base(benchmark="b2", task="choice"), '{"id": "false"}', '{"id": "false", "value": 1e999}'),
    _text(_base(benchmark="b2", task="choice"), '{"id": "false"}', '{"id": "false", "value": NaN}'),
    _text(_base(), '"false": 0.25', '"false": 1e999'),
    "[1, 2]", '"text"', "{not json",
    # fields and ids
    {k: v for k, v in _base().items() if k != "options"}, {**_base(), "extra": 1},
    _base(benchmark="bad id"), _base(benchmark=7), _base(case_id=3), _base(question_id=None),
    _base(task="rank"), _base(task=["noul"]),
    # options
    _base(options={"false": {}, "true": {}}), _base(options=[{"id": "false"}]), _base(options=[]),
    _base(options=[{"id": "false"}, {"id": "true"}, {"id": "true"}]), _base(options=[{"id": "false"}, "true"]),
    _base(options=[{"id": "false"}, {"id": "true", "label": "yes"}]), _base(options=[{"id": "false"}, {"value": 1}]),
    _base(options=[{"id": "false"}, {"id": 1}]), _base(options=[{"id": "no"}, {"id": "yes"}]),
    _base(benchmark="b2", task="choice", options=[{"id": "false", "value": True}, {"id": "true"}]),
    _base(benchmark="b2", task="choice", options=[{"id": "false", "value": "1"}, {"id": "true"}]),
    _base(benchmark="b2", task="score", options=[{"id": "false", "value": 0}, {"id": "true"}]),
    _base(benchmark="b2", task="score", options=[{"id": "false", "value": 0}, {"id": "true", "value": None}]),
    _base(benchmark="b2", task="score", options=[{"id": "false", "value": 2}, {"id": "true", "value": 2.0}]),
    # target and prediction
    _base(target=[0.25, 0.75]), _base(target={"false": 0.25}), _base(target={"false": 0.5, "true": 0.6}),
    _base(target={"false": False, "true": True}), _base(target={"false": "0", "true": 1}),
    _base(prediction="null"), _base(prediction=[0.5, 0.5]), _base(prediction={"false": 0.5, "yes": 0.5}),
    _base(prediction={"false": -0.5, "true": 1.5}), _base(prediction={"false": 0.5, "true": 0.5, "x": 0}),
    # (choice and score lines above use their own benchmark: a second task for "b" is refused anyway)
    # across lines: a second task for the benchmark, a duplicate judgment
    _base(task="choice"), _base(case_id="c0"),
], ids=lambda bad: (bad if isinstance(bad, str) else json.dumps(bad))[-60:])
def test_fast_pass_refuses_every_line_the_strict_pass_rejects(tmp_path, bad):
    path = write_lines(tmp_path / "bad.jsonl", [noul_line("c0", 1, 1, bench="b"), bad, noul_line("c9", 0, 0, bench="b")])
    with pytest.raises(Exception):
        _metrics_fast(path)
    with pytest.raises(InputError) as strict:
        _metrics_strict(path)
    with pytest.raises(InputError) as err:
        metrics_from_jsonl(path)
    assert str(err.value) == str(strict.value) and str(err.value).startswith(f"{path}:2: ")
    assert gc.isenabled()


def test_first_bad_line_is_reported_when_a_later_line_fails_a_column_check(tmp_path):
    # line 2's target sum is only checked when scoring; line 3 fails a check of the fast pass first
    lines = [noul_line("c0", 1, 1, bench="b"), _base(case_id="c1", target={"false": 0.5, "true": 0.6}),
             _base(case_id="c2", task="rank")]
    path = write_lines(tmp_path / "bad.jsonl", lines)
    with pytest.raises(InputError) as err:
        metrics_from_jsonl(path)
    assert str(err.value) == (f"{path}:2: benchmark 'b' case 'c1' question 'q': "
                              "target probabilities sum to 1.1, not within 1e-5 of 1")

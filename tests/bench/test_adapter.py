"""The S1MB adapter: question mapping, calibrated temperatures, valid distributions, chunked readout, routing."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from tests.bench.s1mb_helpers import criterion, dataset_row, decision_row, definition, mixed_row, target_row

from decision_pipeline.bench import adapter
from decision_pipeline.bench.adapter import (
    S1mbParams, chunk_bounds, compose_chunks, load_readout_temperatures, predict_cases, readout_distributions,
    select_routed, thinking_distribution, to_pipeline_question,
)
from decision_pipeline.bench.s1mb import case_from_row, check_probabilities, score_benchmark
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.readout import softmax

T1 = {"noul": 1.0, "choice": 1.0, "score": 1.0}


def s1mb_params(**overrides) -> S1mbParams:
    """The ``s1mb`` section as the stage loads it (every key given: the params carry no code defaults)."""
    values = dict(batch_size=32, route_fraction=0.0, route_eps=0.01, max_new_tokens=96, cohort_dir="", threads=1, backend="hf",
                  bootstrap=20)
    return S1mbParams(**{**values, **overrides})


def text_reader(score, calls=None, temperature=1.0):
    """A fake readout: each option's logit is ``score(option text)``; records every batch it reads."""
    def read(questions):
        if calls is not None:
            calls.append([[o["text"] for o in q["options"]] for q in questions])
        assert all(len(q["options"]) <= 8 for q in questions), "the reader must never see > 8 options"
        return [softmax(np.array([score(o["text"]) for o in q["options"]], dtype=float), temperature)
                for q in questions]
    return read


def numbers_case(case_id, numbers):
    crit = [criterion(f"o{i}", str(x)) for i, x in enumerate(numbers)]
    best = f"o{numbers.index(max(numbers))}"
    row = dataset_row(case_id, [decision_row("q", "choice", crit, "Which number is the largest?")],
                      [target_row("q", {f"o{i}": float(f"o{i}" == best) for i in range(len(numbers))})])
    return case_from_row(row)


# ---------------------------------------------------------------- chunking

def test_chunk_bounds_are_balanced_contiguous_and_cover_all_options():
    assert chunk_bounds(12) == [(0, 6), (6, 12)]
    assert chunk_bounds(8) == [(0, 8)]
    assert chunk_bounds(9) == [(0, 5), (5, 9)]
    assert [b - a for a, b in chunk_bounds(17)] == [6, 6, 5]
    bounds = chunk_bounds(151)
    sizes = [b - a for a, b in bounds]
    assert len(bounds) == 19 and max(sizes) <= 8 and max(sizes) - min(sizes) <= 1
    assert bounds[0][0] == 0 and bounds[-1][1] == 151
    assert all(bounds[i][1] == bounds[i + 1][0] for i in range(len(bounds) - 1))


def test_compose_chunks_hand_checked():
    first = np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.05])
    second = np.array([0.1, 0.1, 0.1, 0.1, 0.2, 0.4])
    composed = compose_chunks([first, second], np.array([0.25, 0.75]))
    assert composed.shape == (12,)
    assert composed[0] == pytest.approx(0.125)          # 0.25 * 0.5
    assert composed[5] == pytest.approx(0.0125)         # 0.25 * 0.05
    assert composed[6] == pytest.approx(0.075)          # 0.75 * 0.1
    assert composed[11] == pytest.approx(0.3)           # 0.75 * 0.4
    assert composed.sum() == pytest.approx(1.0, abs=1e-12)
    single = np.array([0.3, 0.7])
    assert np.array_equal(compose_chunks([single], np.array([1.0])), single)
    with pytest.raises(ValueError):
        compose_chunks([first, second], np.array([1.0]))


def test_chunked_readout_of_12_options_reads_chunks_then_winners():
    numbers = [5, 40, 3, 17, 8, 21, 90, 1, 64, 2, 77, 30]
    case = numbers_case("c", numbers)
    q = to_pipeline_question(case, case.questions[0])
    score = lambda text: int(text) / 20.0  # noqa: E731  fixed logits: larger number, larger logit
    calls, stats = [], {}
    dist = readout_distributions(text_reader(score, calls), [q], stats=stats)[0]
    # one batched read of the two chunks (authored order), then one read of the two winners
    assert calls == [[["5", "40", "3", "17", "8", "21"], ["90", "1", "64", "2", "77", "30"]], [["40", "90"]]]
    chunk_a = softmax(np.array(numbers[:6]) / 20.0)
    chunk_b = softmax(np.array(numbers[6:]) / 20.0)
    final = softmax(np.array([40, 90]) / 20.0)
    np.testing.assert_allclose(dist, np.concatenate([final[0] * chunk_a, final[1] * chunk_b]), rtol=0, atol=1e-15)
    assert dist.sum() == pytest.approx(1.0, abs=1e-12)
    assert int(np.argmax(dist)) == numbers.index(90)
    assert stats == {"chunked_questions": 1, "max_chunks": 2, "depth": 1}


def test_chunked_readout_equals_plain_readout_up_to_8_options():
    rng = np.random.default_rng(0)
    questions = []
    for k in range(2, 9):
        numbers = [int(x) for x in rng.choice(1000, size=k, replace=False)]
        case = numbers_case(f"c{k}", numbers)
        questions.append(to_pipeline_question(case, case.questions[0]))
    read = text_reader(lambda t: (int(t) % 7) / 3.0)
    calls, stats = [], {}
    got = readout_distributions(text_reader(lambda t: (int(t) % 7) / 3.0, calls), questions, stats=stats)
    for q, d, plain in zip(questions, got, read(questions)):
        assert np.array_equal(d, plain), q["id"]
    assert len(calls) == 1 and stats == {}


def test_nested_chunking_above_64_options_sums_to_one():
    numbers = list(range(100, 170))  # 70 options -> 9 chunks -> 9 winners -> 2 chunks -> final
    case = numbers_case("big", numbers)
    q = to_pipeline_question(case, case.questions[0])
    calls, stats = [], {}
    dist = readout_distributions(text_reader(lambda t: int(t) / 10.0, calls), [q], stats=stats)[0]
    assert len(calls) == 3 and [len(c) for c in calls] == [9, 2, 1]
    assert dist.shape == (70,) and dist.sum() == pytest.approx(1.0, abs=1e-12)
    assert int(np.argmax(dist)) == 69
    assert stats == {"chunked_questions": 1, "max_chunks": 9, "depth": 2}


# ---------------------------------------------------------------- mapping and validity

def test_noul_probabilities_are_keyed_by_option_id_not_position():
    rows = [
        dataset_row("false-first", [decision_row("q", "noul", [criterion("false", "no"), criterion("true", "yes")])],
                    [target_row("q", {"false": 0.0, "true": 1.0})]),
        dataset_row("true-first", [decision_row("q", "noul", [criterion("true", "yes"), criterion("false", "no")])],
                    [target_row("q", {"false": 0.0, "true": 1.0})]),
    ]
    cases = [case_from_row(r) for r in rows]
    prefers_yes = text_reader(lambda t: 3.0 if t == "yes" else 0.0)
    preds = predict_cases(cases, prefers_yes, s1mb_params(), seed=0, temperatures=T1).readout
    p_yes = softmax(np.array([3.0, 0.0]))[0]
    for pred in preds:
        assert pred.probabilities["true"] == pytest.approx(p_yes)
        assert pred.probabilities["false"] == pytest.approx(1 - p_yes)
    # a reader that always prefers label A gives p(true) high only where 'true' is authored first
    prefers_a = lambda qs: [softmax(np.array([2.0] + [0.0] * (len(q["options"]) - 1))) for q in qs]  # noqa: E731
    preds = predict_cases(cases, prefers_a, s1mb_params(), seed=0, temperatures=T1).readout
    assert preds[0].probabilities["true"] < 0.5 < preds[1].probabilities["true"]


def test_question_mapping_renders_state_system_prompt_and_options():
    row = mixed_row("c1")
    row["input"]["state_json"] = json.dumps({"messages": [{"role": "user", "content": "hi"}], "query": "q?"})
    row["input"]["decisions"][2]["system_prompt"] = "Be strict."
    case = case_from_row(row)
    label, relevant, quality = (to_pipeline_question(case, q) for q in case.questions)
    assert relevant["question"] == "user: hi\nquery: q?\n\nJudge."
    assert quality["question"].startswith("Be strict.\n\n")
    assert [o["id"] for o in label["options"]] == ["b", "a"] and label["options"][0]["text"] == '{"label":"B"}'
    assert [o["value"] for o in quality["options"]] == [0.0, 4.0] and quality["task"] == "score"
    assert label["gold"] == "a" and label["id"] == "c1/label"
    empty = case_from_row(dataset_row("c2", [decision_row("d", "choice", [criterion("x", "X"), criterion("y", "Y")],
                                                          "Pick one.")], [target_row("d", {"x": 1.0, "y": 0.0})]))
    empty = type(empty)(**{**empty.__dict__, "state_json": "{}"})
    assert to_pipeline_question(empty, empty.questions[0])["question"] == "Pick one."


@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
def test_distributions_are_valid_for_every_task_and_score(temperature):
    rng = np.random.default_rng(1)
    cases = [case_from_row(mixed_row(f"c{i}", t_true=float(i % 2), label="ab"[i % 2], hi=0.25 + 0.1 * (i % 3)))
             for i in range(6)]

    def read(qs):
        return [softmax(rng.normal(0, 3, size=len(q["options"])), temperature) for q in qs]

    got = predict_cases(cases, read, s1mb_params(), seed=0, temperatures=dict.fromkeys(T1, temperature))
    preds, settings = got.readout, got.settings
    assert len(preds) == 18
    for case in cases:
        for q in case.questions:
            pred = next(p for p in preds if p.case_id == case.case_id and p.question_id == q.id)
            check_probabilities(pred.probabilities, q.option_ids)
            assert list(pred.probabilities) == list(q.option_ids)
            assert abs(sum(pred.probabilities.values()) - 1) < 1e-12
    question_of = {"noul": "relevant", "choice": "label", "score": "quality"}
    for task in ("noul", "choice", "score"):
        mine = [p for p in preds if p.question_id == question_of[task]]
        metrics = score_benchmark(definition(f"s-{task}-test-v1", task, 6, 6), cases, mine)
        assert metrics[{"noul": "binary_brier", "choice": "target_mass_at_prediction",
                        "score": "normalized_expected_score_mae"}[task]] is not None
    assert settings["temperatures"] == {"noul": temperature, "choice": temperature, "score": temperature}
    assert settings["many_options"]["chunk_size"] == 8 and settings["many_options"]["chunked_questions"] == 0


def test_model_reader_applies_the_per_task_temperature(tiny, questions):
    from decision_pipeline.decision.evaluate.answering import readout
    model, tok = tiny
    qs = [next(q for q in questions if q["task"] == t) for t in ("noul", "choice", "score")]
    logits = readout(model, tok, qs, batch_size=4)
    temps = {"noul": 0.5, "choice": 1.0, "score": 4.0}
    got = adapter.model_reader(model, tok, temps, batch_size=4)(qs)
    for q, lg, p in zip(qs, logits, got):
        np.testing.assert_allclose(p, softmax(lg, temps[q["task"]]), atol=1e-12)
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert not np.allclose(got[2], softmax(logits[2], 1.0))  # temperature 4 really flattens


# ---------------------------------------------------------------- routed thinking

def test_select_routed_takes_the_lowest_margins():
    dists = [np.array([0.9, 0.1]), np.array([0.55, 0.45]), np.array([0.5, 0.3, 0.2]), np.array([0.7, 0.3])]
    assert select_routed(dists, 0.0) == []
    assert select_routed(dists, 0.5) == [1, 2]            # margins 0.8, 0.1, 0.2, 0.4
    assert select_routed(dists, 0.25) == [1]
    assert select_routed(dists, 1.0, eligible=[True, False, True, True]) == [0, 2, 3]
    with pytest.raises(ValueError):
        select_routed(dists, 1.5)


def test_thinking_distribution_is_smoothed_one_hot():
    d = thinking_distribution(4, 2, 0.03)
    np.testing.assert_allclose(d, [0.01, 0.01, 0.97, 0.01])
    assert d.sum() == pytest.approx(1.0, abs=1e-15)
    with pytest.raises(ValueError):
        thinking_distribution(4, 4, 0.03)


def test_routed_thinking_replaces_parsed_answers_and_keeps_the_rest(monkeypatch):
    cases = [case_from_row(mixed_row(f"c{i}")) for i in range(2)]  # 6 questions
    # margins: label 0.9-0.1, noul nearly tied, score clearly decided
    fixed = {"choice": [0.9, 0.1], "noul": [0.49, 0.51], "score": [0.95, 0.05]}
    read = lambda qs: [np.array(fixed[q["task"]]) for q in qs]  # noqa: E731
    seen = []

    def fake_thinking(backend, model, tok, questions, settings, batch_size):
        seen.extend(q["id"] for q in questions)
        assert settings.temperature == 0.0 and settings.max_new_tokens == 7
        return [{"thinking_pred": 1 if q["id"].startswith("c0") else None} for q in questions]

    monkeypatch.setattr("decision_pipeline.decision.evaluate.answering.thinking", fake_thinking)
    config = s1mb_params(route_fraction=2 / 6, route_eps=0.1, max_new_tokens=7)
    got = predict_cases(cases, read, config, seed=0, temperatures=T1, model=object(),
                        tok=SimpleNamespace(eos_token_id=0))
    assert seen == ["c0/relevant", "c1/relevant"]         # the two lowest-margin questions
    by_id = {(p.case_id, p.question_id): p.probabilities for p in got.routed}
    assert by_id[("c0", "relevant")] == pytest.approx({"false": 0.1, "true": 0.9})    # parsed B = true
    assert by_id[("c1", "relevant")] == pytest.approx({"false": 0.49, "true": 0.51})  # parse failed: readout kept
    assert by_id[("c0", "label")] == pytest.approx({"b": 0.9, "a": 0.1})               # not routed
    assert got.routed_settings["routing"]["routed"] == 2 and got.routed_settings["routing"]["parsed"] == 1
    # the readout-only variant of the same run is the plain readout everywhere; only the parsed question differs
    plain = {"label": {"b": 0.9, "a": 0.1}, "relevant": {"false": 0.49, "true": 0.51},
             "quality": {"lo": 0.95, "hi": 0.05}}
    assert all(p.probabilities == pytest.approx(plain[p.question_id]) for p in got.readout)
    differ = [(r.case_id, r.question_id) for r, o in zip(got.routed, got.readout) if r.probabilities != o.probabilities]
    assert differ == [("c0", "relevant")]
    assert got.settings["routing"] == {"method": "none", "fraction": 0.0}
    assert {k: v for k, v in got.routed_settings.items() if k != "routing"} == {
        k: v for k, v in got.settings.items() if k != "routing"}


def test_route_fraction_zero_gives_identical_variants_without_thinking():
    cases = [case_from_row(mixed_row(f"c{i}")) for i in range(3)]
    rng = np.random.default_rng(4)
    read = lambda qs: [softmax(rng.normal(0, 2, size=len(q["options"]))) for q in qs]  # noqa: E731
    got = predict_cases(cases, read, s1mb_params(route_fraction=0.0), seed=0, temperatures=T1)  # no model needed
    assert [p.probabilities for p in got.routed] == [p.probabilities for p in got.readout]
    assert got.routed_settings == got.settings and got.routing_seconds >= 0
    with pytest.raises(ValueError, match="model and tokenizer"):
        predict_cases(cases, read, s1mb_params(route_fraction=0.5), seed=0, temperatures=T1)


# ---------------------------------------------------------------- calibrated temperatures

def write_temps(tmp_path, readout, post_chain=None):
    path = tmp_path / "temperatures.json"
    path.write_text(json.dumps({"readout": readout, "post_chain": post_chain or {}}))
    return path


def test_temperatures_file_is_applied_per_task_and_missing_tasks_read_as_one(tmp_path):
    temps = load_readout_temperatures(write_temps(tmp_path, {"choice": 2.5, "score": 0.5}, {"noul": 9.0}))
    assert temps == {"noul": 1.0, "choice": 2.5, "score": 0.5}          # post_chain is not the readout's
    logits = {"choice": [1.0, -0.5], "noul": [0.3, 0.8], "score": [2.0, 0.0]}
    read = lambda qs: [softmax(np.array(logits[q["task"]]), temps[q["task"]]) for q in qs]  # noqa: E731
    cases = [case_from_row(mixed_row("c0"))]
    got = predict_cases(cases, read, s1mb_params(), seed=0, temperatures=temps)
    by_q = {p.question_id: list(p.probabilities.values()) for p in got.readout}
    for qid, task in (("label", "choice"), ("relevant", "noul"), ("quality", "score")):
        np.testing.assert_allclose(by_q[qid], softmax(np.array(logits[task]), temps[task]), atol=1e-12)
    assert by_q["label"] != pytest.approx(list(softmax(np.array(logits["choice"]), 1.0)))  # T really applied
    assert got.settings["temperatures"] == temps
    # a calibrated score temperature changes the S1MB score metric (expectation over values); T = 1 differs
    plain = predict_cases(cases, lambda qs: [softmax(np.array(logits[q["task"]])) for q in qs], s1mb_params(),
                          seed=0, temperatures=T1)
    score_def = definition("s-score-test-v1", "score", 1, 1)
    mine = [p for p in got.readout if p.question_id == "quality"]
    base = [p for p in plain.readout if p.question_id == "quality"]
    assert (score_benchmark(score_def, cases, mine)["normalized_expected_score_mae"]
            != pytest.approx(score_benchmark(score_def, cases, base)["normalized_expected_score_mae"]))
    assert load_readout_temperatures(write_temps(tmp_path, {})) == T1


@pytest.mark.parametrize("content, problem", [
    (None, "file not found"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "'readout' object"),
    ('{"post_chain": {}}', "'readout' object"),
    ('{"readout": [1.5]}', "'readout' object"),
    ('{"readout": {"chioce": 1.5}}', "readout.chioce: unknown task"),
    ('{"readout": {"score": 0}}', "readout.score: temperature must be a finite number > 0"),
    ('{"readout": {"score": -2.0}}', "readout.score: temperature must be"),
    ('{"readout": {"noul": "2.0"}}', "readout.noul: temperature must be"),
    ('{"readout": {"noul": true}}', "readout.noul: temperature must be"),
    ('{"readout": {"noul": NaN}}', "readout.noul: temperature must be"),
])
def test_bad_temperatures_file_is_one_line_error_naming_the_file(tmp_path, content, problem):
    path = tmp_path / "calibrate" / "temperatures.json"
    if content is not None:
        path.parent.mkdir()
        path.write_text(content)
    with pytest.raises(PipelineError) as err:
        load_readout_temperatures(path)
    message = str(err.value)
    assert message.startswith(str(path)) and problem in message and "\n" not in message


def test_routed_questions_take_the_post_chain_readout_on_the_configured_backend(monkeypatch):
    """Issue 21 defect 10 / issue 24: post-chain probabilities (at the post-chain T), not a one-hot, and not always hf."""
    cases = [case_from_row(mixed_row(f"c{i}")) for i in range(2)]
    fixed = {"choice": [0.9, 0.1], "noul": [0.49, 0.51], "score": [0.95, 0.05]}
    read = lambda qs: [np.array(fixed[q["task"]]) for q in qs]  # noqa: E731
    backends = []

    def fake_backend(name, model, tok, model_dir, batch_size):
        backends.append((name, model_dir))
        return object()

    def fake_thinking(backend, model, tok, questions, settings, batch_size):
        # c0: closed chain with post-chain logits [0, ln 3] -> at T 2: softmax([0, ln3/2]) = [1/(1+√3), √3/(1+√3)]
        # c1: chain never closed but a letter parsed -> the 1 - eps fallback
        return [{"thinking_pred": 0, "post_logits": np.array([0.0, np.log(3.0)])} if q["id"].startswith("c0")
                else {"thinking_pred": 0, "post_logits": None} for q in questions]

    monkeypatch.setattr("decision_pipeline.lm.backends.backend_for_model", fake_backend)
    monkeypatch.setattr("decision_pipeline.decision.evaluate.answering.thinking", fake_thinking)
    config = s1mb_params(route_fraction=2 / 6, route_eps=0.1, max_new_tokens=7, backend="vllm")
    got = predict_cases(cases, read, config, seed=0, temperatures=T1, model=object(),
                        tok=SimpleNamespace(eos_token_id=0), post_temperatures={"noul": 2.0}, model_dir="models/x")
    assert backends == [("vllm", "models/x")]
    by_id = {(p.case_id, p.question_id): p.probabilities for p in got.routed}
    r3 = np.sqrt(3.0)
    assert by_id[("c0", "relevant")] == pytest.approx({"false": 1 / (1 + r3), "true": r3 / (1 + r3)})
    assert by_id[("c1", "relevant")] == pytest.approx({"false": 0.9, "true": 0.1})
    routing = got.routed_settings["routing"]
    assert (routing["post_chain"], routing["one_hot_fallback"], routing["parsed"]) == (1, 1, 2)
    assert routing["backend"] == "vllm" and routing["post_chain_temperatures"]["noul"] == 2.0

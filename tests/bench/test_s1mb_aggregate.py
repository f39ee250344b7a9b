"""Task scores, Task Avg (§6) and Borda (§7) on hand-sized cohorts."""
import pytest
from tests.bench.s1mb_helpers import definition

from decision_pipeline.bench.s1mb import (
    BenchmarkScore, borda, category_tasks, display, generalization_subset, leaderboard, task_avg,
    task_scores,
)

CATEGORY = {"n1": "noul", "n2": "noul", "c1": "choice", "s1": "score"}


def row(values, category=CATEGORY, **overrides):
    """One model: {benchmark: BenchmarkScore}; overrides replace single entries."""
    out = {b: BenchmarkScore(category[b], v) for b, v in zip(category, values)}
    out.update(overrides)
    return out


def test_task_scores_weight_benchmarks_equally_and_tasks_by_thirds():
    scores = task_scores(row([0.2, 0.4, 0.9, 0.3]), CATEGORY)
    assert scores == pytest.approx({"noul": 0.3, "choice": 0.9, "score": 0.3})
    assert task_avg(scores) == pytest.approx(0.5)
    assert display(task_avg(scores)) == "50.00" and display(None) == "N/A"


@pytest.mark.parametrize("gap", ["missing", "partial", "demo", "partial-ineligible"])
def test_coverage_gate_makes_the_task_null(gap):
    scores = row([0.2, 0.4, 0.9, 0.3])
    if gap == "missing":
        del scores["n2"]
    elif gap == "partial":
        scores["n2"] = BenchmarkScore("noul", 0.4, complete=False)
    elif gap == "demo":
        scores["n2"] = BenchmarkScore("noul", 0.4, complete=False, demo=True)
    else:  # even an ineligible benchmark must be covered
        scores["n2"] = BenchmarkScore("noul", None, eligible=False, complete=False)
    result = task_scores(scores, CATEGORY)
    assert result["noul"] is None and result["choice"] == 0.9
    assert task_avg(result) is None


def test_ineligible_benchmark_is_skipped_in_the_mean_but_not_an_error():
    scores = row([0.2, 0.4, 0.9, 0.3], n2=BenchmarkScore("noul", None, eligible=False))
    assert task_scores(scores, CATEGORY)["noul"] == 0.2
    only_ineligible = row([0.2, 0.4, 0.9, 0.3], s1=BenchmarkScore("score", 0.3, eligible=False))
    assert task_scores(only_ineligible, CATEGORY)["score"] is None      # E_T empty
    null_adjusted = row([0.2, None, 0.9, 0.3])
    assert task_scores(null_adjusted, CATEGORY)["noul"] is None        # eligible with null S


def test_ineligible_benchmark_makes_borda_null_for_everyone():
    models = {"m1": row([0.2, 0.4, 0.9, 0.3]), "m2": row([0.1, 0.4, 0.5, 0.3])}
    # n1: m1 wins; n2: tie (.5 each); c1: m1 wins; s1: tie -> m1 (1+.5+1+.5)/4
    assert borda(models, CATEGORY) == {"m1": 0.75, "m2": 0.25}
    models["m2"]["n2"] = BenchmarkScore("noul", 0.4, eligible=False)
    assert borda(models, CATEGORY) == {"m1": None, "m2": None}
    board = leaderboard(models, CATEGORY)
    assert board["m2"]["task_avg"] is not None and board["m2"]["borda"] is None


def test_borda_averages_exact_ties_and_weights_benchmarks_equally():
    category = {"b0": "choice", "b1": "choice", "b2": "noul", "b3": "score"}
    models = {"0": row([1, 1, 0, 0.5], category), "1": row([0, 0, 1, 0.5], category),
              "2": row([0.5, 0.5, 0.5, 0.5], category)}
    # b0, b1: 1, 0, .5 points; b2: 0, 1, .5; b3: everyone ties -> .5 each.
    assert borda(models, category) == pytest.approx({"0": 0.625, "1": 0.375, "2": 0.5})
    three = {"b0": "choice", "b1": "noul", "b2": "score"}
    tied = {"0": row([1, 1, 1], three), "1": row([1, 1, 1], three), "2": row([0, 0, 0], three)}
    assert borda(tied, three) == pytest.approx({"0": 0.75, "1": 0.75, "2": 0.0})


def test_only_exactly_equal_values_tie():
    three = {"b0": "choice", "b1": "noul", "b2": "score"}
    models = {"a": row([0.5, 0.5, 0.5], three), "b": row([0.5 + 1e-12, 0.5, 0.5], three)}
    points = borda(models, three)
    assert points["b"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert points["a"] == pytest.approx((0 + 0.5 + 0.5) / 3)


def test_roster_change_changes_borda_but_magnitudes_do_not():
    three = {"b0": "choice", "b1": "noul", "b2": "score"}
    models = {"0": row([0.9] * 3, three), "1": row([0.8] * 3, three), "2": row([0.0] * 3, three)}
    assert borda(models, three)["1"] == pytest.approx(0.5)
    squared = {m: {b: BenchmarkScore(s.task, s.adjusted ** 2) for b, s in r.items()} for m, r in models.items()}
    assert borda(squared, three) == borda(models, three)
    del models["2"]
    assert borda(models, three)["1"] == 0


def test_137_benchmarks_count_once_without_task_reweighting():
    category = {f"c{i}": "choice" for i in range(135)} | {"n": "noul", "s": "score"}
    first = row([1.0] * 135 + [0.0, 0.0], category)
    second = row([0.0] * 135 + [1.0, 1.0], category)
    points = borda({"first": first, "second": second}, category)
    assert points == pytest.approx({"first": 135 / 137, "second": 2 / 137})
    # ... while Task Avg weights each task by a third.
    assert task_avg(task_scores(second, category)) == pytest.approx(2 / 3)


@pytest.mark.parametrize("failure", ["partial", "demo", "missing", "undefined"])
def test_incomplete_demo_and_undefined_models_stay_outside_the_cohort(failure):
    three = {"b0": "choice", "b1": "noul", "b2": "score"}
    models = {"0": row([1, 1, 1], three), "1": row([0.5] * 3, three), "2": row([0, 0, 0], three)}
    if failure == "partial":
        models["0"]["b0"] = BenchmarkScore("choice", 1, complete=False)
    elif failure == "demo":
        models["0"]["b0"] = BenchmarkScore("choice", 1, complete=False, demo=True)
    elif failure == "missing":
        del models["0"]["b0"]
    else:
        models["0"]["b0"] = BenchmarkScore("choice", None)
    assert borda(models, three) == {"0": None, "1": 1.0, "2": 0.0}


def test_borda_needs_two_models_and_every_definition():
    three = {"b0": "choice", "b1": "noul", "b2": "score"}
    assert borda({"solo": row([1, 1, 1], three)}, three) == {"solo": None}
    assert borda({}, three) == {}
    models = {"0": row([1, 0, 1], three), "1": row([0, 1, 0], three)}
    missing_definition = three | {"gone": None}
    for m in models.values():
        m["gone"] = BenchmarkScore("choice", 0.5)
    assert borda(models, missing_definition) == {"0": None, "1": None}
    assert category_tasks(["b0", "x"], {"b0": definition("b0", "noul", 1, 1)}) == {"b0": "noul", "x": None}


def test_generalisation_subset_recomputes_coverage_and_borda():
    tasks = ["choice", "noul", "score"] * 3
    definitions = {f"b{i}": definition(f"b{i}", t, 1, 1, subset=f"sub{i}") for i, t in enumerate(tasks)}
    for i in range(6, 9):
        b = definitions[f"b{i}"]
        definitions[b.id] = definition(b.id, b.task, 1, 1, subset=f"s1mb-generalization-diverse-{b.task}")
    ids = list(definitions)
    full = category_tasks(ids, definitions)
    general = category_tasks(generalization_subset(ids, definitions), definitions)
    assert list(general) == ["b6", "b7", "b8"]
    models = {"0": row([1] * 6 + [0.2] * 3, full), "1": row([0] * 6 + [0.8] * 3, full),
              "2": {b: BenchmarkScore(t, 0.5) for b, t in general.items()}}  # complete only on the subset
    assert borda(models, full) == {"0": pytest.approx(2 / 3), "1": pytest.approx(1 / 3), "2": None}
    assert borda(models, general) == pytest.approx({"0": 0.0, "1": 1.0, "2": 0.5})
    assert task_scores(models["2"], full)["noul"] is None
    assert task_scores(models["2"], general) == {"noul": 0.5, "choice": 0.5, "score": 0.5}
    assert task_scores(models["0"], general)["choice"] == pytest.approx(0.2)
    assert task_scores(models["0"], full)["choice"] == pytest.approx((1 + 1 + 0.2) / 3)

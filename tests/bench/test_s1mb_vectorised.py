"""The numpy implementation agrees with the literal per-decision loop on random benchmarks."""
import numpy as np
import pytest

from decision_pipeline.bench.s1mb import Decision, Prediction, reference_metrics, score_decisions


def random_benchmark(task, seed, n=60):
    rng = np.random.default_rng(seed)
    decisions, predictions = [], []
    for i in range(n):
        if task == "noul":
            options = ("false", "true") if rng.random() < 0.5 else ("true", "false")
        else:
            k = int(rng.choice([2, 3, 5, 151])) if task == "choice" else int(rng.integers(3, 6))
            pool = [f"o{j}" for j in range(k + 3)]
            options = tuple(rng.permutation(pool)[:k]) if task == "choice" else tuple(f"s{j}" for j in range(k))

        def dist(hard, rounded=False):
            if hard:
                p = np.zeros(len(options))
                p[rng.integers(len(options))] = 1.0
            else:
                p = rng.dirichlet(np.ones(len(options)))
                if rounded:  # creates exact ties and sums a little off 1 (within 1e-5)
                    p = np.round(p, 1)
                    p[np.argmax(p)] += 1.0 - p.sum()
                    p[np.argmin(p)] += 4e-6
            pairs = list(zip(options, p.tolist()))
            if rng.random() < 0.3:  # key order need not follow the authored order
                pairs = [pairs[j] for j in rng.permutation(len(pairs))]
            return dict(pairs)

        target = dist(hard=rng.random() < 0.5)
        values = tuple(float(v) for v in rng.integers(-3, 8, len(options))) if task == "score" else None
        if values is not None and len(set(values)) < 2:
            values = (0.0,) + values[1:-1] + (9.0,)
        decisions.append(Decision(f"c{i // 2}", f"q{i % 2}", options, target, values))
        roll = rng.random()
        if roll < 0.15:
            predictions.append(Prediction(f"c{i // 2}", f"q{i % 2}", error="TimeoutError"))
        elif roll < 0.25:
            continue  # never predicted (a --limit run)
        else:
            predictions.append(Prediction(f"c{i // 2}", f"q{i % 2}", dist(hard=False, rounded=roll < 0.6)))
    return decisions, predictions


@pytest.mark.parametrize("task", ["noul", "choice", "score"])
@pytest.mark.parametrize("seed", range(8))
def test_vectorised_equals_reference_loop(task, seed):
    decisions, predictions = random_benchmark(task, seed)
    fast = score_decisions(task, decisions, predictions)
    slow = reference_metrics(task, decisions, predictions)
    assert list(fast) == list(slow)
    for key, value in slow.items():
        if value is None:
            assert fast[key] is None, key
        else:
            assert fast[key] == pytest.approx(value, abs=1e-12, rel=0), key


def test_prepared_benchmark_scores_several_models_like_one_shot_scoring():
    from decision_pipeline.bench.s1mb import prepare, score_prepared
    decisions, first = random_benchmark("choice", 11)
    second = [Prediction(p.case_id, p.question_id, error="ValueError") for p in first[::2]]
    prepared = prepare("choice", decisions, "x-choice-test-v1")
    one = score_prepared(prepared, first)
    two = score_prepared(prepared, second)
    assert one == score_decisions("choice", decisions, first, "x-choice-test-v1")
    assert two == score_decisions("choice", decisions, second)  # scoring leaves no state behind
    assert two["target_mass_at_prediction"] is None and one["target_mass_at_prediction"] is not None
    for key, value in prepared.baselines.items():
        assert one[key] == two[key] == value

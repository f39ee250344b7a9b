"""Session fixtures for the curation tests: one small generated pool, dev set and model."""
from __future__ import annotations

import numpy as np
import pytest

from decision_pipeline.curation.classifier import ClassifierParams
from decision_pipeline.curation.documents import REGISTERS, generate_dev, generate_pool
from decision_pipeline.curation.minhash import MinhashParams

FILTER_CONFIG = {
    "min_words": {"min": 50},
    "alpha_ratio": {"min": 0.7},
    "repeated_lines": {"max_dup_line_frac": 0.3},
    "boilerplate": {"max_hits": 0},
}

# The values params.yaml sets for curate.minhash / curate.classifier; the library has no defaults.
MINHASH = MinhashParams(num_perm=64, bands=16, rows=4, ngram=5)
CLASSIFIER = ClassifierParams(n_buckets=1 << 18, epochs=8, lr=2.0, l2=1e-5, n_background=60,
                              checkpoint="best_heldout")


@pytest.fixture(scope="session")
def filter_config() -> dict:
    return {k: dict(v) for k, v in FILTER_CONFIG.items()}


@pytest.fixture(scope="session")
def pool() -> list[dict]:
    return generate_pool(2000, 0.3, np.random.default_rng(123))


@pytest.fixture(scope="session")
def dev(pool) -> list[dict]:
    return generate_dev(60, REGISTERS, np.random.default_rng(456), avoid_texts=[d["text"] for d in pool])


@pytest.fixture(scope="session")
def model(dev, pool):
    from decision_pipeline.curation.classifier import train_classifier
    return train_classifier(dev, pool, list(REGISTERS), CLASSIFIER, seed=0)


@pytest.fixture(scope="session")
def filtered(pool, filter_config) -> list[dict]:
    from decision_pipeline.curation.filters import apply_filters, build_filters
    return apply_filters(pool, build_filters(filter_config)).kept


@pytest.fixture(scope="session")
def deduped(filtered):
    from decision_pipeline.curation.minhash import dedup
    return dedup(filtered, MINHASH, seed=1)

"""Fixtures for the charter tests: the project's charter file and small texts."""
from __future__ import annotations

import pytest

from decision_pipeline.charter.charter import load_charter, parse_charter
from decision_pipeline.charter.checks import CheckParams

SMALL_CHARTER = """# Charter

## 1 Honesty

### 1.1 Truthful claims
Say only what the text supports and mark unverified claims as such.

## 2 Harm

### 2.1 Hostile language
Insults aimed at people are not repeated or rewarded in any reply.
"""


@pytest.fixture(scope="session")
def charter():
    return load_charter("configs/charter/charter.md")


@pytest.fixture(scope="session")
def small_charter():
    return parse_charter(SMALL_CHARTER, "small-charter")


@pytest.fixture
def checks() -> CheckParams:
    return CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5)

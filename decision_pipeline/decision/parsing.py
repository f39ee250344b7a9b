"""Parse the answer letter out of a thinking-mode completion."""
from __future__ import annotations

import re

from decision_pipeline.decision.questions import LABELS

_ANSWER = re.compile(r"Answer:\s*([A-H])\b")


def parse_answer(text: str, n_options: int) -> int | None:
    """Index of the answered option after the chain (last `Answer: X`), or None if unparsable."""
    tail = text.split("</think>")[-1] if "</think>" in text else text
    found = _ANSWER.findall(tail)
    if not found:
        return None
    index = LABELS.index(found[-1])
    return index if index < n_options else None

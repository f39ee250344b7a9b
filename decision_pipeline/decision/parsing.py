"""Parse the answer letter out of a thinking-mode completion, and say why when it cannot.

The contract is the one `questions.ANSWER_INSTRUCTION` states to the model: think inside
`<think>` … `</think>`, then one line `Answer: X`. The parser reads the last `Answer: X`
after the last `</think>`; a reply with no thinking block at all is read whole (the
readout's own `Answer: X` format). Every failure has a reason, so a run whose chains do
not parse says *which* part of the format the model missed:

- `no_think_close`: the thinking block was opened and never closed (cap hit, or the
  tokenizer cannot write `</think>`);
- `no_answer_line`: no `Answer: <letter>` after `</think>`;
- `label_not_an_option`: the letter is past the question's last option.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from decision_pipeline.questions.schema import LABELS, THINK_CLOSE, THINK_OPEN

_ANSWER = re.compile(r"Answer:\s*([A-H])\b")

UNPARSED_REASONS = ("no_think_close", "no_answer_line", "label_not_an_option")


def parse_with_reason(text: str, n_options: int) -> tuple[int | None, str | None]:
    """(option index, None) when `text` follows the contract, else (None, one of UNPARSED_REASONS)."""
    if THINK_CLOSE in text:
        tail = text.split(THINK_CLOSE)[-1]
    elif THINK_OPEN in text:
        return None, "no_think_close"
    else:
        tail = text
    found = _ANSWER.findall(tail)
    if not found:
        return None, "no_answer_line"
    index = LABELS.index(found[-1])
    return (index, None) if index < n_options else (None, "label_not_an_option")


def parse_answer(text: str, n_options: int) -> int | None:
    """Index of the answered option after the chain (last `Answer: X`), or None if unparsable."""
    return parse_with_reason(text, n_options)[0]


def unparsed_by_reason(reasons: Iterable[str | None]) -> dict[str, int]:
    """Count of each unparsed reason (every reason present, zeros included; parsed entries are None)."""
    counts = dict.fromkeys(UNPARSED_REASONS, 0)
    for r in reasons:
        if r is not None:
            counts[r] += 1
    return counts

"""The one error type of the S1MB library and helpers to word its messages.

Every bad-input message is a single line that says *where* (file, benchmark,
case, question) and *what* is wrong, so a user can fix the input without a
traceback. ``S1MBError`` subclasses the project's ``PipelineError`` so stage
entry points handle it like every other user-fixable problem.
"""
from __future__ import annotations

from collections.abc import Iterable

from decision_pipeline.common.errors import PipelineError

__all__ = ["S1MBError", "show_ids"]


class S1MBError(PipelineError):
    """Bad S1MB input; ``str(err)`` is one line naming the location and the problem."""

    def __init__(
        self,
        detail: str,
        *,
        file: str | None = None,
        benchmark: str | None = None,
        case: str | None = None,
        question: str | None = None,
    ) -> None:
        parts = []
        if file is not None:
            parts.append(f"file {str(file)!r}")
        if benchmark is not None:
            parts.append(f"benchmark {benchmark!r}")
        if case is not None:
            parts.append(f"case {case!r}")
        if question is not None:
            parts.append(f"question {question!r}")
        self.detail = _one_line(detail)
        self.location = " ".join(parts)
        self.benchmark, self.case, self.question = benchmark, case, question
        super().__init__(f"S1MB: {self.located()}")

    def located(self) -> str:
        """The message without the ``S1MB:`` prefix (the CLI puts ``FILE:LINE:`` there)."""
        return f"{self.location}: {self.detail}" if self.location else self.detail

    def at(
        self,
        *,
        benchmark: str | None = None,
        case: str | None = None,
        question: str | None = None,
    ) -> S1MBError:
        """Copy with missing location parts filled in (callers know more than callees)."""
        return S1MBError(
            self.detail,
            benchmark=self.benchmark if self.benchmark is not None else benchmark,
            case=self.case if self.case is not None else case,
            question=self.question if self.question is not None else question,
        )


def _one_line(text: str) -> str:
    return " ".join(str(text).split("\n")).replace("\r", " ")


def show_ids(ids: Iterable[object], limit: int = 8) -> str:
    """Render ids compactly, e.g. ``['a','b']``; long lists are cut to stay readable."""
    items = [repr(i) for i in ids]
    if len(items) > limit:
        return "[" + ",".join(items[:limit]) + f",...(+{len(items) - limit} more)]"
    return "[" + ",".join(items) + "]"

"""One exception type for problems a user can fix (bad params, bad input files).

Stage entry points catch it, print its one-line message and exit non-zero, so a
user sees "what is wrong and how to fix it" instead of a traceback.
"""
from __future__ import annotations


class PipelineError(Exception):
    """A user-fixable error; the message is one line naming file/key/id and the fix."""

"""A thinking-accuracy change told as what moved it: answering more often, or answering better.

Why (issue 50): RL − SFT thinking accuracy was reported as a thinking gain while it was the parse rate
(0.66 -> 0.97) with right-when-answered flat (0.375 -> 0.378): a format change. Thinking accuracy is
parse rate x right-when-answered, so every accuracy change splits exactly into the two, and the
report states both beside every thinking-accuracy difference it gives.
"""
from __future__ import annotations

from decision_pipeline.reporting.report.sources import Store


def thinking_split(s: Store, file: str, prefix: str, base_file: str) -> str:
    """A thinking-accuracy change as answering more often plus answering better (issue 50): parse rate
    change and right-when-answered change, Δacc = Δparse · right_before + parse_after · Δright.

    From the paired keys evaluate records (`<prefix>.thinking_parse_rate`, `.thinking_right_when_answered`,
    `.thinking_decomposition`, with CIs); metrics written before those keys existed give the split from
    each model's parse rate and thinking accuracy, as point estimates, said so."""
    if s.has(file, f"{prefix}.thinking_decomposition.parse_part"):
        get = lambda k: s.number(file, f"{prefix}.{k}", nullable=True)  # noqa: E731
        pb, pm, r0, r1 = (get(k) for k in ("thinking_parse_rate.baseline", "thinking_parse_rate.model",
                                           "thinking_right_when_answered.baseline", "thinking_right_when_answered.model"))
        parse = (f"{get('thinking_parse_rate.diff'):+.3f} [{get('thinking_parse_rate.ci_low'):+.3f}, "
                 f"{get('thinking_parse_rate.ci_high'):+.3f}]")
        rd = get("thinking_right_when_answered.diff")
        right = ("undefined: one side never answered" if rd is None else
                 f"{rd:+.3f} [{get('thinking_right_when_answered.ci_low'):+.3f}, "
                 f"{get('thinking_right_when_answered.ci_high'):+.3f}]")
        pp, rp, ci = get("thinking_decomposition.parse_part"), get("thinking_decomposition.right_part"), "paired 95% CIs"
    else:
        pb, pm = s.number(base_file, "thinking.parse_rate"), s.number(file, "thinking.parse_rate")
        ab, am = s.number(base_file, "cis.thinking_accuracy.point"), s.number(file, "cis.thinking_accuracy.point")
        r0, r1 = (ab / pb if pb else None), (am / pm if pm else None)
        rb_, rm_ = (r0 if r0 is not None else (r1 or 0.0)), (r1 if r1 is not None else (r0 or 0.0))
        pp, rp = (pm - pb) * rb_, pm * (rm_ - rb_)
        parse, right = f"{pm - pb:+.3f}", ("undefined: one side never answered" if None in (r0, r1)
                                           else f"{r1 - r0:+.3f}")
        ci = "point estimates; evaluate records their paired CIs from its next run"
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    return (f"Split of that thinking-accuracy change (this run, {ci}): parse rate {pb:.3f} \u2192 {pm:.3f} "
            f"({parse}) and right when answered {fmt(r0)} \u2192 {fmt(r1)} ({right}); answering more often "
            f"accounts for {pp:+.3f} and answering better for {rp:+.3f}.")

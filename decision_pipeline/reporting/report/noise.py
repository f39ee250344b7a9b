"""Which noise a headline number is shown with, and where that noise was measured.

Why: a within-run half-range (3 pretrain seeds inside one run) understates how
much a number moves when the whole chain is rerun (issue 34: ±0.23 within-run vs
±0.91 across reseeds for curated held-out ppl). When the noise study has written
`metrics/noise/reseed.json` (whole-chain reseeds), every headline it covers is
shown with that SD and its run count; otherwise the recorded within-run figure is
shown, labelled as within-run, so no reader takes one for the other. Where the study measured a
number, its mean over the whole-chain runs with a t-interval is the headline (`study_interval`);
this run's value is shown beside it, labelled (issue 50).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.verdict import t_quantile
from decision_pipeline.reporting.report.sources import Store

NOISE_DIR = "metrics/noise"
RESEED = f"{NOISE_DIR}/reseed.json"
WHOLE_CHAIN = "reseed"
WITHIN_RUN = "within-run"


@dataclass(frozen=True)
class Noise:
    """A noise figure: its size, the source it was measured under and the number of runs behind it."""
    value: float
    source: str              # "reseed" (whole-chain) or "within-run"
    n: int | None
    what: str = ""           # within-run: what varied ("pretrain seeds")
    kind: str = "SD"         # "SD" (noise study) or "half-range" (within-run)
    mean: float | None = None  # whole-chain: the mean over the runs (the study's headline value)


def label(value: float, source: str, n: int | None, spec: str, what: str = "") -> str:
    """'SD ±0.51 (6 whole-chain runs)' (the committed run and 5 reseeds) or 'within-run ±0.23 (half-range,
    3 pretrain seeds)'."""
    v = format(value, spec)
    if source == WHOLE_CHAIN:
        return f"SD \u00b1{v} ({n} whole-chain runs)" if n else f"SD \u00b1{v} (whole-chain runs)"
    runs = f"{n} {what}" if n and what else (what or "repeats in this run")
    return f"within-run \u00b1{v} (half-range, {runs})"


def study_interval(mean: float, sd: float, n: int) -> tuple[float, float]:
    """The 95% t-interval of a mean over `n` whole-chain runs with SD `sd` (n >= 2)."""
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


class NoiseBook:
    """The whole-chain reseed spreads, read once and checked (bad input: one line naming file and key)."""

    def __init__(self, store: Store):
        self.spread: dict[str, dict[str, dict]] = {}
        self.n: int | None = None
        if not store.exists(RESEED):
            return
        data = store.json(RESEED)
        if not isinstance(data, dict) or not isinstance(data.get("spread"), dict):
            raise PipelineError(f"{RESEED}: key 'spread' missing or not a mapping; rerun the noise study's collect step")
        if data.get("source") != WHOLE_CHAIN:
            raise PipelineError(f"{RESEED}: key 'source' is {data.get('source')!r}, an unknown source for this file; "
                                f"expected '{WHOLE_CHAIN}' (the whole-chain reseeds)")
        n_runs = data.get("n")
        if not isinstance(n_runs, int) or isinstance(n_runs, bool) or n_runs < 2:
            raise PipelineError(f"{RESEED}: key 'n' is {n_runs!r}; a noise needs at least 2 runs")
        self.n = n_runs
        for file, keys in data["spread"].items():
            if not isinstance(keys, dict):
                raise PipelineError(f"{RESEED}: key 'spread.{file}' is not a mapping")
            for key, entry in keys.items():
                where = f"{RESEED}: key 'spread.{file}.{key}"
                if not isinstance(entry, dict):
                    raise PipelineError(f"{where}' is not a mapping")
                sd, n, mean = entry.get("sd"), entry.get("n"), entry.get("mean")
                if isinstance(sd, bool) or not isinstance(sd, (int, float)) or not math.isfinite(sd) or sd < 0:
                    raise PipelineError(f"{where}.sd' is {sd!r}, expected a finite number >= 0")
                if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean):
                    raise PipelineError(f"{where}.mean' is {mean!r}, expected a finite number (the mean over the runs)")
                if isinstance(n, bool) or not isinstance(n, int) or n < 2:
                    raise PipelineError(f"{where}.n' is {n!r}, expected a run count >= 2")
        self.spread = data["spread"]

    @property
    def present(self) -> bool:
        return bool(self.spread)

    def whole_chain(self, file: str, key: str) -> Noise | None:
        entry = self.spread.get(file, {}).get(key)
        if entry is None:
            return None
        return Noise(float(entry["sd"]), WHOLE_CHAIN, int(entry["n"]), mean=float(entry["mean"]))

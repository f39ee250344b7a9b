"""Live training progress: a bar or a timed line on the terminal, per-step metrics in a DVCLive directory.

Why one module: pretraining (a hand loop), SFT and GRPO (TRL trainers) trained for minutes without a
word. All three now report through `TrainingProgress`: loss (and reward), tokens/s and ETA as a tqdm
bar on a terminal, or a plain line at least every `progress_seconds()` in a log (a heartbeat line
while a single step runs long); and every step's metrics into DVCLive's files (`LiveMetrics`), which
`dvc plots show` draws and `dvc exp show` reads while `dvc exp run` is still running.

Determinism: the DVCLive directory is meant to be a git-tracked stage output, so only values a rerun
of the same state reproduces go in (losses, rewards, learning rate, the step); DVCLive's timestamp
column stays off, and tokens/s and ETA go to the terminal only. A resumed run first rebuilds the
directory from the checkpoint's own per-step record (`TrainingProgress.replay`), so it ends with the
bytes an uninterrupted run writes, whatever a killed run left behind.
"""
from __future__ import annotations

import math
import shutil
from fnmatch import fnmatch
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TextIO

from tqdm.auto import tqdm
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.log import progress_mode, progress_seconds

# What DVCLive itself may write into its directory; anything else there is not ours to delete.
DVCLIVE_NAMES = frozenset({"metrics.json", "plots", "params.yaml", "report.html", "report.md", "dvc.yaml"})


def _number(value: Any) -> float | int | None:
    """`value` as a plain int or float, or None for what is not a number (bools, strings, None)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return int(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class LiveMetrics:
    """Per-step metrics as DVCLive writes them: `plots/metrics/<key>.tsv` (step, value) per key and
    `metrics.json` with the latest value of each key matching a `summary` pattern (fnmatch; None: every
    key) and the step, rewritten after every step. The summary is what `dvc exp show` adds as columns,
    so it keeps the few keys a person follows; the curves keep every key.

    The directory starts empty every run (a resumed run replays its earlier steps into it). A value
    that is NaN or infinite is left out, with one warning line naming the file and key, so a
    diverged step neither crashes the run nor writes `NaN` into a JSON file other tools reject.
    """

    def __init__(self, directory: str | Path, summary: Sequence[str] | None = None):
        self.dir = Path(directory)
        self.summary = None if summary is None else tuple(summary)
        _reset(self.dir)
        self._live = _file_live()(dir=str(self.dir), resume=False, report=None, save_dvc_exp=False, dvcyaml=None)
        self._warned: set[str] = set()
        self._latest: dict[str, float | int] = {}

    def tsv(self, key: str) -> Path:
        """The history file DVCLive keeps for `key`."""
        return self.dir / "plots" / "metrics" / f"{key}.tsv"

    def log(self, step: int, values: Mapping[str, Any]) -> None:
        """Record `values` at `step` and rewrite the summary (what `dvc exp show` reads mid-run).

        Keys go in sorted order: the summary keeps first-seen order, and a replayed record (TRL saves
        its log history with sorted keys) must give the file an uninterrupted run writes."""
        self._live.step = int(step)
        for key, raw in sorted(values.items()):
            value = _number(raw)
            if value is None:
                continue
            if not math.isfinite(value):
                if key not in self._warned:
                    self._warned.add(key)
                    print(f"warning: {self.tsv(key)}: {key} is {value} at step {step}; left out of the curve and "
                          "of metrics.json (later non-finite values of this key too)", file=sys.stderr, flush=True)
                continue
            self._live.log_metric(key, value)
            self._latest[key] = value
        if self.summary is not None:
            self._live.summary = nested({k: v for k, v in sorted(self._latest.items())
                                         if any(fnmatch(k, pattern) for pattern in self.summary)})
        self._live.make_summary()


def nested(flat: Mapping[str, Any]) -> dict:
    """{"train/loss": 1} -> {"train": {"loss": 1}}, as DVCLive nests its summary."""
    out: dict = {}
    for key, value in flat.items():
        *parents, leaf = key.split("/")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def _file_live() -> type:
    """dvclive's `Live` as a file writer only. Why: dvc.yaml declares the files, so DVCLive needs no
    repository of its own; left to itself it opens one (0.5 s, git packs that print noise at exit),
    and in a git repository without `.dvc` it would even run `dvc init` there."""
    from dvclive import Live

    class FileLive(Live):
        def _init_dvc(self) -> None:
            self._dvc_file = "dvc.yaml"  # never written: dvcyaml=None

    return FileLive


def _reset(directory: Path) -> None:
    """Empty `directory` for a new run; refuse one holding files DVCLive does not write (a wrong path)."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise PipelineError(f"{directory}: exists and is not a directory; the DVCLive metrics need a directory "
                            "of their own (--live)")
    foreign = sorted(p.name for p in directory.iterdir() if p.name not in DVCLIVE_NAMES)
    if foreign:
        raise PipelineError(f"{directory}: holds {foreign[0]!r}, which DVCLive does not write; the DVCLive "
                            "metrics need a directory of their own (--live)")
    shutil.rmtree(directory)


def clock_text(seconds: float) -> str:
    """H:MM:SS (or M:SS under an hour)."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def rate_text(per_second: float) -> str:
    return f"{per_second / 1000:.1f}k" if per_second >= 1000 else f"{per_second:.0f}"


def value_text(value: Any) -> str:
    number = _number(value)
    return "-" if number is None else f"{number:.4g}"


class TrainingProgress:
    """One training run's reporting: `replay` (steps a resumed run already has), `begin`, `step`, `close`.

    `mode` "bar" draws a tqdm bar (tqdm's own rate and ETA, the shown values and tokens/s after it),
    "lines" prints a line when `every` seconds have passed since the last (and at the last step), "off"
    prints nothing; by default it follows `progress_mode()`. `live` receives every step's values under
    `live_prefix`. `clock` is injectable so a test can drive the cadence.
    """

    def __init__(self, stage: str, desc: str | None = None, *, live: LiveMetrics | None = None,
                 live_prefix: str = "train", shown: Sequence[str] = ("loss",), enabled: bool = True,
                 mode: str | None = None, every: float | None = None, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, heartbeat: bool = True):
        self.stage, self.desc, self.live, self.live_prefix = stage, desc, live, live_prefix
        self.shown, self.clock = tuple(shown), clock
        self.mode = (mode or progress_mode()) if enabled else "off"
        self.every = float(every) if every is not None else (progress_seconds() if self.mode == "lines" else 1.0)
        self.stream = stream if stream is not None else sys.stderr
        self.latest: dict[str, Any] = {}
        self.start = self.at = self.total = 0
        self.tokens0: float | None = None
        self.tokens: float | None = None  # set once a step reports its token count
        self.began: float | None = None
        self._last_print = self._last_step = 0.0
        self._bar: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat = heartbeat
        self._thread: threading.Thread | None = None

    @classmethod
    def open(cls, stage: str, live_dir: str | Path | None, main: bool = True, *, shown: Sequence[str] = ("loss",),
             live_prefix: str = "train", **options: Any) -> "TrainingProgress":
        """A run's progress with its own DVCLive directory, whose summary holds the `shown` keys; on a
        non-main process it neither prints nor writes."""
        live = (LiveMetrics(live_dir, summary=[_prefixed(live_prefix, k) for k in shown])
                if live_dir is not None and main else None)
        return cls(stage, live=live, live_prefix=live_prefix, shown=shown, enabled=main, **options)

    def _record(self, step: int, values: Mapping[str, Any]) -> None:
        if self.live is not None:
            self.live.log(step, {_prefixed(self.live_prefix, k): v for k, v in values.items()})
        with self._lock:
            self.latest.update(values)

    def replay(self, rows: Iterable[tuple[int, Mapping[str, Any]]]) -> None:
        """Steps finished before this run (a checkpoint's record): into the live files, nothing printed."""
        for step, values in rows:
            self._record(step, values)
            self.at = max(self.at, int(step))

    def begin(self, start: int, total: int, tokens: float | None = None) -> None:
        """Training starts (or resumes) at step `start` of `total`, with `tokens` seen so far."""
        with self._lock:
            self.start = self.at = int(start)
            self.total, self.tokens0, self.tokens = int(total), tokens, None
            self.began = self._last_print = self._last_step = self.clock()
            if self.mode == "bar":
                self._bar = tqdm(total=self.total, initial=self.start, desc=self.desc or self.stage, unit="step",
                                 file=self.stream, dynamic_ncols=True, leave=False)
            elif self.mode == "lines":
                resumed = f", resuming after step {self.start}" if self.start else ""
                self._print(f"{self._head()} {self.total} steps{resumed}; a progress line every {self.every:g}s")
        if self._heartbeat and self.mode != "off" and self._thread is None:
            self._thread = threading.Thread(target=self._beat, name=f"progress-{self.stage}", daemon=True)
            self._thread.start()

    def step(self, step: int, values: Mapping[str, Any], tokens: float | None = None) -> None:
        """Step `step` finished with `values` (and `tokens` seen in total, when known)."""
        self._record(step, values)
        with self._lock:
            now = self.clock()
            self.at, self._last_step = int(step), now
            if tokens is not None:
                self.tokens = tokens
            if self._bar is not None:
                self._bar.set_postfix_str(self._postfix(now), refresh=False)
                self._bar.update(self.at - self._bar.n)
            elif self.mode == "lines" and (now - self._last_print >= self.every or self.at >= self.total):
                self._print(self.line(now))
                self._last_print = now

    def tick(self) -> None:
        """The heartbeat: a line (or a bar redraw) when nothing was shown for `every` seconds, so a slow
        step (a GRPO generation round, a big model's first step) still shows the run is alive."""
        with self._lock:
            now = self.clock()
            if self._bar is not None:
                self._bar.refresh()
            elif self.mode == "lines" and self.began is not None and now - self._last_print >= self.every:
                self._print(self.line(now, running=now - self._last_step))
                self._last_print = now

    def _beat(self) -> None:
        while not self._stop.wait(self.every / 4):  # a line at most 1.25 x `every` apart
            self.tick()

    def _rates(self, now: float) -> tuple[float | None, float | None]:
        """(tokens per second, seconds left) of this run so far; None where not known yet."""
        elapsed = now - (self.began if self.began is not None else now)
        done = self.at - self.start
        tok_s = ((self.tokens - self.tokens0) / elapsed if self.tokens is not None and self.tokens0 is not None
                 and elapsed > 0 else None)
        eta = (self.total - self.at) * elapsed / done if done > 0 else None
        return tok_s, eta

    def _head(self) -> str:
        """`[stage]`, then the run's own name when it has one (`[pretrain] curated seed 2:`)."""
        desc = (self.desc or "").removeprefix(self.stage).strip()
        return f"[{self.stage}] {desc}:" if desc else f"[{self.stage}]"

    def _shown_text(self) -> str:
        return " ".join(f"{k} {value_text(self.latest[k])}" for k in self.shown if k in self.latest)

    def _postfix(self, now: float) -> str:
        tok_s, _ = self._rates(now)
        parts = [self._shown_text()] + ([f"{rate_text(tok_s)} tok/s"] if tok_s is not None else [])
        return ", ".join(p for p in parts if p)

    def line(self, now: float, running: float | None = None) -> str:
        """The plain progress line: step, shown values, tokens/s, elapsed and ETA."""
        tok_s, eta = self._rates(now)
        elapsed = now - (self.began if self.began is not None else now)
        pct = f" ({100 * self.at / self.total:.0f}%)" if self.total else ""
        parts = [f"{self._head()} step {self.at}/{self.total}{pct}"]
        if self._shown_text():
            parts.append(self._shown_text())
        if tok_s is not None:
            parts.append(f"{rate_text(tok_s)} tok/s")
        parts.append(f"{clock_text(elapsed)} elapsed" + (f", ETA {clock_text(eta)}" if eta is not None else ""))
        if running is not None and running >= self.every / 2 and self.at < self.total:  # a slow step, not a gap
            parts.append(f"step {self.at + 1} running for {clock_text(running)}")
        return " | ".join(parts)

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the heartbeat and the bar (the DVCLive files are complete after every step)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> "TrainingProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _prefixed(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key


class StepRowsCallback(TrainerCallback):
    """Feeds a trainer's per-step rows (one dict with "step" appended to `rows` per optimizer step, as
    SFT's loss parts are) to a `TrainingProgress`; `values(row)` picks what is reported."""

    def __init__(self, progress: TrainingProgress, rows: list[dict], values: Callable[[dict], Mapping[str, Any]],
                 tokens_per_step: float | None = None):
        self.progress, self.rows, self.values, self.tokens_per_step = progress, rows, values, tokens_per_step
        self.seen = 0

    def _tokens(self, step: int) -> float | None:
        return None if self.tokens_per_step is None else step * self.tokens_per_step

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> TrainerControl:
        self.seen = len(self.rows)
        self.progress.begin(state.global_step, state.max_steps, self._tokens(state.global_step))
        return control

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> TrainerControl:
        for row in self.rows[self.seen:]:
            self.progress.step(int(row["step"]), self.values(row), self._tokens(int(row["step"])))
        self.seen = len(self.rows)
        return control


class LogHistoryCallback(TrainerCallback):
    """Feeds a trainer's own logs (`logging_steps=1`) to a `TrainingProgress`: `values(logs)` picks the
    deterministic keys. On resume the checkpoint's `log_history` is replayed first, so the live files
    hold every step. `tokens_key` names the cumulative token count in the logs (tokens/s)."""

    def __init__(self, progress: TrainingProgress, values: Callable[[Mapping[str, Any]], Mapping[str, Any]],
                 tokens_key: str | None = "num_tokens"):
        self.progress, self.values, self.tokens_key = progress, values, tokens_key

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> TrainerControl:
        earlier = [e for e in state.log_history if "step" in e and int(e["step"]) <= state.global_step]
        self.progress.replay((int(e["step"]), v) for e in earlier if (v := self.values(e)))
        self.progress.begin(state.global_step, state.max_steps, float(state.num_input_tokens_seen or 0))
        return control

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> TrainerControl:
        values = self.values(logs or {})
        if values:
            tokens = (logs or {}).get(self.tokens_key) if self.tokens_key else None
            self.progress.step(state.global_step, values, _number(tokens))
        return control

"""Build the report: plan from the registry, validate every input, draw, lay out, write atomically.

Why this order: every metrics key, plot data file and image is read and checked
while planning, before anything is written, so bad input is one message naming
file and key and `report/` never holds a half-built PDF. Figures go to a
temporary directory that replaces `plots/report` only when the PDF built.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.yamlio import load_yaml
from decision_pipeline.common.io import atomic_dir, write_bytes_atomic, write_json
from decision_pipeline.reporting import pdf
from decision_pipeline.reporting.registry import Fig, Row, Section, expected_pages, resolve, summary_entries
from decision_pipeline.reporting.sections import SECTIONS
from decision_pipeline.reporting.sources import Store



@dataclass
class Plan:
    """Active sections with their text, rows and figures; skipped sections with the reason."""
    active: list[tuple[Section, list[str], list[Row], list[Fig]]]
    skipped: list[tuple[Section, str]]

    @property
    def rows(self) -> list[Row]:
        return [r for _, _, rows, _ in self.active for r in rows]

    @property
    def figure_counts(self) -> list[int]:
        return [len(figs) for *_, figs in self.active]


def make_plan(store: Store, sections: tuple[Section, ...] = SECTIONS) -> Plan:
    """Resolve every section against the store; raises PipelineError (file and key) on bad input."""
    active, skipped = [], []
    for sec in sections:
        if not sec.active(store):
            missing = [r for r in sec.requires if not store.exists(r)]
            skipped.append((sec, "missing " + ", ".join(missing)))
            continue
        sentences = sec.narrative(store)
        rows = [r for r in (resolve(store, h) for h in sec.headlines) if r is not None]
        figs = sec.figures(store)
        for fig in figs:
            if fig.image is not None:
                store.image(fig.image)
        active.append((sec, sentences, rows, figs))
    return Plan(active, skipped)


def run_digest(root: Path) -> str:
    """What identifies the run: a digest of dvc.lock's upstream stage entries (deps, params, outs).

    Not the git revision or the clock: the report is itself a tracked output, and a stamp that
    changes every run would leave the repository dirty after every `dvc repro`.
    """
    lock = root / "dvc.lock"
    if not lock.is_file():
        return "unlocked (no dvc.lock)"
    stages = (load_yaml(lock.read_text(encoding="utf-8"), str(lock)) or {}).get("stages", {})
    upstream = {name: entry for name, entry in stages.items() if name != "report"}
    digest = hashlib.sha256(json.dumps(upstream, sort_keys=True).encode()).hexdigest()[:16]
    return f"sha256:{digest} ({len(upstream)} stages in dvc.lock)"


def run_meta(root: Path, params_path: Path) -> pdf.Meta:
    text = params_path.read_bytes()
    profile = (load_yaml(text.decode("utf-8", "replace"), str(params_path)) or {}).get("base", {}).get("profile", "unknown")
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc).strftime("%Y-%m-%d %H:%M") if epoch
            else "not stamped (set SOURCE_DATE_EPOCH)")
    return pdf.Meta(run_digest(root), "sha256:" + hashlib.sha256(text).hexdigest()[:16], str(profile), when)


def stage_lines(dvc_yaml: Path, params: dict) -> list[str]:
    """One line per dvc.yaml stage (foreach expanded to name@item) with its description."""
    stages = (load_yaml(dvc_yaml.read_text(encoding="utf-8"), str(dvc_yaml)) or {}).get("stages", {})
    lines = []
    for name, st in stages.items():
        body = st.get("do", st)
        desc = " ".join(str(body.get("desc", "")).split())
        items = st.get("foreach")
        if isinstance(items, str) and items.startswith("${"):
            items = params
            for part in items_key(st["foreach"]):
                items = items.get(part, {}) if isinstance(items, dict) else {}
        if items is not None:
            values = list(items) if isinstance(items, (list, dict)) else [items]
            name += "@{" + ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) + "}"
        lines += textwrap.wrap(f"{name:<26} {desc}", pdf.LINE_CHARS, subsequent_indent=" " * 27) or [name]
    return lines


def items_key(expr: str) -> list[str]:
    return expr.strip()[2:-1].split(".")


def listings(root: Path, params_path: Path) -> list[tuple[str, list[str]]]:
    params_text = params_path.read_text(encoding="utf-8")
    dvc_yaml = root / "dvc.yaml"
    stages = stage_lines(dvc_yaml, load_yaml(params_text, "params.yaml") or {}) if dvc_yaml.is_file() else ["(no dvc.yaml)"]
    return [(f"Appendix A: params used ({params_path.name})", params_text.splitlines()),
            ("Appendix B: stages (dvc.yaml)", stages)]


def build_report(root: str | Path, pdf_out: str | Path, summary_out: str | Path, figures_dir: str | Path,
                 params_path: str | Path) -> dict:
    """Build figures, the PDF and summary.json from the tracked metrics under `root`; returns counts."""
    root = Path(root)
    params_path = Path(params_path)
    if not params_path.is_file():
        raise PipelineError(f"{params_path}: params file not found; run from the repository root or pass --params")
    store = Store(root)
    plan = make_plan(store)
    meta, lists = run_meta(root, params_path), listings(root, params_path)
    with atomic_dir(root / figures_dir) as tmp:
        blocks = []
        for sec, sentences, rows, figs in plan.active:
            drawn = [(f, f.build(store, tmp / f"{f.id}.png") if f.build else store.path(f.image)) for f in figs]
            blocks.append(pdf.Block(sec, sentences, sentences[:sec.key_sentences], rows, drawn))
        data = pdf.render(meta, blocks, plan.skipped, lists)
    write_json(root / summary_out, summary_entries(plan.rows))
    write_bytes_atomic(root / pdf_out, data)
    return {"sections": len(plan.active), "skipped": len(plan.skipped), "figures": sum(plan.figure_counts),
            "headlines": len(plan.rows), "pages": expected_pages(plan.figure_counts, pdf.appendix_pages(lists)),
            "bytes": len(data)}

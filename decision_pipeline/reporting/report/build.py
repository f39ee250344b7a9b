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
import sys
from dataclasses import dataclass
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.dvcfiles import address, lock_files, pipeline_files
from decision_pipeline.common.yamlio import load_yaml
from decision_pipeline.common.io import atomic_dir, write_bytes_atomic, write_json
from decision_pipeline.reporting.layout import caption_problems
from decision_pipeline.reporting.report import pdf
from decision_pipeline.reporting.report import figures as F
from decision_pipeline.reporting.report.claims import load_claims, store_claims
from decision_pipeline.reporting.report.noise import NoiseBook
from decision_pipeline.reporting.report.registry import Fig, Row, Section, expected_pages, resolve, summary_entries
from decision_pipeline.reporting.report.sections import SECTIONS
from decision_pipeline.reporting.report.sources import MissingKey, Store



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
    book = NoiseBook(store)                   # metrics/noise/reseed.json, checked before anything is drawn
    store_claims(store)                       # metrics/claims.json, likewise
    active, skipped = [], []
    for sec in sections:
        if not sec.active(store):
            missing = [r for r in sec.requires if not store.exists(r)]
            skipped.append((sec, "missing " + ", ".join(missing)))
            continue
        sentences = sec.narrative(store)
        rows = [r for r in (resolve(store, h, book) for h in sec.headlines) if r is not None]
        figs = sec.figures(store)
        for fig in figs:
            if fig.image is not None:
                store.image(fig.image)
        active.append((sec, sentences, rows, figs))
    return Plan(active, skipped)


def locked_stages(root: Path) -> dict[str, dict] | None:
    """Every stage entry of the pipeline's dvc.lock files ({DVC's address: entry}); None without any lock."""
    locks = lock_files(root)
    if not locks:
        return None
    return {address(root, lock, name): entry for lock in locks
            for name, entry in ((load_yaml(lock.read_text(encoding="utf-8"), str(lock)) or {}).get("stages") or {}).items()}


def run_digest(root: Path) -> str:
    """What identifies the run: a digest of what dvc.lock's upstream stages produced (params, outs).

    Not the git revision or the clock: the report is itself a tracked output, and a stamp that
    changes every run would leave the repository dirty after every `dvc repro`. Not the deps either:
    a code or config edit that reruns a stage to the same outputs changes its deps' hashes without
    rerunning the report, which would leave a stale digest on the title page (the code digest, below,
    names the code, and the report depends on all of it).
    """
    stages = locked_stages(root)
    if stages is None:
        return "unlocked (no dvc.lock)"
    upstream = {name: {key: entry.get(key) for key in ("params", "outs")}
                for name, entry in stages.items() if name != "report" and isinstance(entry, dict)}
    digest = hashlib.sha256(json.dumps(upstream, sort_keys=True).encode()).hexdigest()[:16]
    return f"sha256:{digest} ({len(upstream)} stages in the dvc.lock files)"


CODE_PREFIXES = ("decision_pipeline", "stages", "scripts")


def code_digest(root: Path) -> str:
    """'sha256:<16 hex> (<n> code deps)': a digest of the code each upstream stage ran, as dvc.lock records it.

    Not the git commit: the PDF is built before the commit that holds it, so a commit stamp could never
    match a forced rerun of the committed state. Read from the lock, so it names what ran, not the tree.
    """
    stages = locked_stages(root)
    if stages is None:
        return "unlocked (no dvc.lock)"
    code = sorted({(d.get("path", ""), str(d.get("md5", ""))) for name, entry in stages.items() if name != "report"
                   for d in (entry.get("deps") or []) if isinstance(d, dict)
                   and str(d.get("path", "")).split("/")[0] in CODE_PREFIXES})
    if not code:
        return "no code deps in dvc.lock"
    return f"sha256:{hashlib.sha256(json.dumps(code).encode()).hexdigest()[:16]} ({len(code)} code deps)"


def run_meta(root: Path, params_path: Path) -> pdf.Meta:
    """Title-page facts; the date is SOURCE_DATE_EPOCH when set, never the clock or a commit date."""
    text = params_path.read_bytes()
    profile = (load_yaml(text.decode("utf-8"), "params.yaml") or {}).get("base", {}).get("profile", "unknown")
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        when = dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc).strftime("%Y-%m-%d %H:%M") + " (SOURCE_DATE_EPOCH)"
    else:
        when = "the date of the git commit that holds this PDF (set SOURCE_DATE_EPOCH to print one)"
    return pdf.Meta(run_digest(root), "sha256:" + hashlib.sha256(text).hexdigest()[:16], str(profile), when,
                    code_digest(root))


def stage_rows(dvc_yaml: Path, params: dict) -> list[tuple[str, str]]:
    """(name, description) per dvc.yaml stage, foreach expanded to name@{item,...}."""
    stages = (load_yaml(dvc_yaml.read_text(encoding="utf-8"), str(dvc_yaml)) or {}).get("stages", {})
    rows = []
    for name, st in stages.items():
        body = st.get("do", st)
        desc = " ".join(str(body.get("desc", "")).split()).replace("${item}", "<item>").replace("${key}", "<item>")
        items = st.get("foreach")
        if isinstance(items, str) and items.startswith("${"):
            items = params
            for part in items_key(st["foreach"]):
                items = items.get(part, {}) if isinstance(items, dict) else {}
        if items is not None:
            values = list(items) if isinstance(items, (list, dict)) else [items]
            name += "@{" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) + "}"
        rows.append((name, desc))
    return rows


def items_key(expr: str) -> list[str]:
    return expr.strip()[2:-1].split(".")


def listings(root: Path, params_path: Path) -> list[tuple[str, list[str]]]:
    """The params listing of Appendix A."""
    return [(f"Appendix A: params used ({params_path.name})", params_path.read_text(encoding="utf-8").splitlines())]


def stages_of(root: Path, params_path: Path) -> list[tuple[str, str]]:
    files = pipeline_files(root)
    if not files:
        return [("(no dvc.yaml)", "")]
    params = load_yaml(params_path.read_text(encoding="utf-8"), "params.yaml") or {}
    return [row for f in files for row in stage_rows(f, params)]


def noise_note(store: Store) -> str:
    book = NoiseBook(store)
    if book.present:
        return (f"Run-to-run noise is the SD over {book.n} whole-chain runs (the committed run and {book.n - 1} "
                "reseeds of base.seed, metrics/noise/reseed.json) wherever the noise study covers a number.")
    return ("No whole-chain noise study yet (metrics/noise/reseed.json): the noise shown is within-run (e.g. the "
            "half-range over this run's pretrain seeds) and understates a rerun's spread.")


def draw(store: Store, fig: Fig, out: Path) -> tuple[Fig, Path]:
    """Build one figure; when its metrics lack a key it needs, a marked placeholder instead (NaN still fails)."""
    if not fig.build:
        return fig, store.path(fig.image)
    try:
        return fig, fig.build(store, out)
    except MissingKey as exc:
        return Fig(fig.id, f"Not drawn: {exc}", fig.build, fig.image), F.placeholder(out, str(exc))


def build_report(root: str | Path, pdf_out: str | Path, summary_out: str | Path, figures_dir: str | Path,
                 params_path: str | Path, headline_out: str | Path | None = None) -> dict:
    """Build figures, the PDF and summary.json from the tracked metrics under `root`; returns counts.
    `headline_out` gets the headline values alone ({name: value}): the file dvc.yaml declares as the
    pipeline's metrics, so `dvc exp show` shows the README table's numbers and not 1,700 detail keys."""
    root = Path(root)
    params_path = Path(params_path)
    if not params_path.is_file():
        raise PipelineError(f"{params_path}: params file not found; run from the repository root or pass --params")
    store = Store(root)
    plan = make_plan(store)
    meta, lists, stages = run_meta(root, params_path), listings(root, params_path), stages_of(root, params_path)
    n_min, claims = load_claims(store)
    F.LAYOUT_PROBLEMS.clear()
    F.BAR_VALUES.clear()
    with atomic_dir(root / figures_dir) as tmp:
        blocks = []
        for sec, sentences, rows, figs in plan.active:
            drawn = [draw(store, f, tmp / f"{f.id}.png") for f in figs]
            for f, png in drawn:        # a caption that says more than its bars show is a defect too
                F.LAYOUT_PROBLEMS.setdefault(png.name, []).extend(
                    f"figure {f.id}: {p}" for p in caption_problems(f.caption, F.BAR_VALUES.get(png.name, {})))
            blocks.append(pdf.Block(sec, sentences, sentences[:sec.key_sentences], rows, drawn))
        data = pdf.render(meta, blocks, plan.skipped, lists, stages, claims, n_min, noise_note(store))
    write_json(root / summary_out, summary_entries(plan.rows))
    if headline_out is not None:
        write_json(root / headline_out, {r.headline.name: r.value for r in plan.rows})
    write_bytes_atomic(root / pdf_out, data)
    problems = [p for name in sorted(F.LAYOUT_PROBLEMS) for p in F.LAYOUT_PROBLEMS[name]]
    for problem in problems:
        print(f"report: layout: {problem}", file=sys.stderr)
    missing = sum(1 for b in blocks for f, _ in b.figures if f.caption.startswith("Not drawn:"))
    return {"sections": len(plan.active), "skipped": len(plan.skipped), "figures": sum(plan.figure_counts),
            "headlines": len(plan.rows), "pages": expected_pages(plan.figure_counts, pdf.appendix_pages(lists, len(stages)),
                                                                 bool(claims)),
            "bytes": len(data), "figures_not_drawn": missing, "layout_problems": len(problems)}

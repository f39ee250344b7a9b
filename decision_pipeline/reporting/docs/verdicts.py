"""Every verdict the README, docs/ and the report state about a claim, checked against `metrics/claims.json`.

Why (issue 50): the report said "no verdict" for three comparisons its own claims page called detected,
and docs said the RL reward "rises" where the whole-chain runs did not detect it. Numbers are checked by
their markers (numbers.py); verdict words need their own check, because a sentence can be worded from
one run's CI while the claims file judges the same comparison over the whole-chain runs.

How: the text is rendered (markers evaluated, markup dropped; the PDF through `pdftotext`) and cut into
units (a table row, a paragraph, a PDF page) and sentences. A claim is mentioned by its label or one of
its aliases (ALIASES: the phrasings the docs and the report use); the first verdict phrase after a
mention, before the next mention or the end of the sentence, is what the text states about that claim:
"detected", "higher by", "lower by", "rises", "falls" need the claim detected; "not detected", "no
difference detected", "not detectably" need it not detected; "not tested" needs not tested (too few
runs is not "not detected"); "no verdict" and "not yet judged" are wrong for any claim the file judges. Docs that carry the
whole family (README, the report, docs/results.md, docs/reliability.md) must state every claim. A doc
marker that words a verdict from one run's CI (`direction(...)`, `detected(...)`) on a claimed metric
fails too: it must cite `claims:comparisons.<name>`.

    python -m decision_pipeline verdicts README.md docs/*.md report/report.pdf    # exit 1 on a problem
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.reporting.docs.numbers import MARK, regenerate, split_body
from decision_pipeline.reporting.docs.values import REF, Sources, source_path
from decision_pipeline.reporting.report.claims import CLAIMS, Claim, check_claims, claim_for, statement

#: the phrasings of each claim besides its label (normalised: lower case, ASCII minus)
ALIASES: dict[str, tuple[str, ...]] = {
    "curated_vs_filtered_random_ppl": ("curated - filtered_random held-out ppl", "curated - filtered_random",
                                       "curated vs filtered_random", "curated minus filtered random"),
    "curated_vs_random_ppl": ("curated - random held-out ppl", "curated - random", "curated vs random"),
    "curated_vs_random_ppl_equal_registers": ("curated - random held-out ppl, registers weighted equally",),
    "sft_vs_base_readout": ("sft - base readout", "sft minus base readout accuracy", "readout accuracy of sft vs base"),
    "sft_vs_base_thinking": ("sft - base thinking", "sft minus base thinking", "thinking accuracy of sft vs base"),
    "sft_vs_base_s1mb": ("sft - base s1mb",),
    "sft_routed_vs_readout": ("sft routed (30% to thinking) - sft readout",),
    "sft_margin_vs_learned_router": ("sft margin - learned router",),
    "sft_decision_score_vs_prior": ("sft brier skill over the label prior", "sft decision score: brier vs label prior"),
    "rl_reward_gain": ("rl training reward", "training reward gain", "the training reward", "rl reward gain",
                       "mean reward, last vs first quarter"),
    "rl_vs_sft_thinking": ("rl - sft thinking", "rl minus sft thinking accuracy", "thinking accuracy of rl vs sft"),
    "rl_vs_sft_readout": ("rl - sft readout", "rl minus sft readout accuracy", "readout accuracy of rl vs sft"),
    "rl_top_answer_vs_gold_share": ("rl top-answer - top-gold share", "rl top-answer share - top gold share",
                                    "rl last round: top answer's share - the top gold index's share"),
}
#: verdict phrases, longest first; what each says: detected, not detected, not tested, or no verdict at all
PHRASES = (("no difference detected", "not detected"), ("does not move detectably", "not detected"),
           ("not detectably", "not detected"), ("not detected", "not detected"), ("not tested", "not tested"),
           ("not yet judged", "none"), ("no verdict", "none"), ("higher by", "detected"), ("lower by", "detected"),
           ("rises", "detected"), ("falls", "detected"), ("detected", "detected"))
PHRASE = re.compile(r"\b(" + "|".join(re.escape(p) for p, _ in PHRASES) + r")\b")
SAYS = dict(PHRASES)
SENTENCE_END = re.compile(r"\.\s+(?=[A-Z(\u2022*])|\u2022")
#: docs that carry the whole family of claims: each must state every claim's verdict
WHOLE_FAMILY = ("README.md", "docs/results.md", "docs/reliability.md", "report/report.pdf")


@dataclass(frozen=True)
class Statement:
    """A verdict a text states about a claim: where, the sentence, the phrase and what it means."""
    source: str
    where: str
    sentence: str
    claim: Claim
    phrase: str

    @property
    def problem(self) -> str | None:
        says, verdict = SAYS[self.phrase], self.claim.verdict
        ok = says == verdict                 # "none" (no verdict, not yet judged) is never right for a judged claim
        if ok:
            return None
        return (f"{self.source}{self.where}: \"{_excerpt(self.sentence)}\" says '{self.phrase}' about {self.claim.name} "
                f"({self.claim.label}), but {CLAIMS} says: {statement(self.claim)}")


def norm(text: str) -> str:
    """Lower case, one ASCII minus for the typographic ones, markup and runs of white space dropped."""
    text = text.replace("\u2212", "-").replace("\u2013", "-").replace("**", "").replace("`", "")
    return " ".join(text.lower().split())


def _excerpt(sentence: str, width: int = 220) -> str:
    return sentence if len(sentence) <= width else sentence[: width - 3] + "..."


def mentions(text: str, claims: list[Claim]) -> list[tuple[int, int, Claim]]:
    """(start, end, claim) of every claim mention in normalised `text`, the longest alias winning an overlap."""
    found = []
    for c in claims:
        names = {norm(c.label), norm(re.sub(r"\s*\([^)]*\)\s*$", "", c.label)), *ALIASES.get(c.name, ())}
        for alias in names:
            for m in re.finditer(r"(?<![\w-])" + re.escape(alias) + r"(?![\w])", text):
                found.append((m.start(), m.end(), c))
    kept: list[tuple[int, int, Claim]] = []
    for start, end, c in sorted(found, key=lambda f: (f[0], -(f[1] - f[0]))):
        if not kept or start >= kept[-1][1]:
            kept.append((start, end, c))
    return kept


def statements(text: str, claims: list[Claim], source: str, where: str = "") -> list[Statement]:
    """The verdicts one unit of text (a row, a paragraph, a page) states about the claims."""
    out = []
    for raw in SENTENCE_END.split(text):
        sentence = norm(raw)
        found = mentions(sentence, claims)
        for i, (_, end, c) in enumerate(found):
            stop = found[i + 1][0] if i + 1 < len(found) else len(sentence)
            m = PHRASE.search(sentence, end, stop)
            if m:
                out.append(Statement(source, where, sentence, c, m.group(1)))
    return out


def markdown_units(text: str) -> list[tuple[int, str]]:
    """(line, text) of each table row and each paragraph, marker comments and HTML comments dropped."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    units, para, start = [], [], 0
    for i, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("|"):
            units.append((i, line))
        elif line.strip():
            start = start or i
            para.append(line)
            continue
        if para:
            units.append((start, " ".join(para)))
            para, start = [], 0
    if para:
        units.append((start, " ".join(para)))
    return units


def pdf_pages(path: Path) -> list[str]:
    """The report's text per page: `pdftotext` (poppler) where installed, else pypdfium2's text layer."""
    if shutil.which("pdftotext"):
        run = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True)
        if run.returncode != 0:
            raise PipelineError(f"{path}: pdftotext failed ({run.stderr.strip()[:120]}); rebuild the report")
        return run.stdout.split("\f")
    import pypdfium2 as pdfium
    doc = pdfium.PdfDocument(str(path))
    return [doc[i].get_textpage().get_text_range() for i in range(len(doc))]


def marker_problems(text: str, doc: str, claims: list[Claim]) -> list[str]:
    """Markers that word a verdict from one run's CI (direction/detected) on a metric the claims file judges."""
    out = []
    for i, line in enumerate(text.split("\n"), 1):
        for m in MARK.finditer(line):
            expr = split_body(m.group("body"))[0]
            if not re.search(r"\b(direction|detected)\(", expr):
                continue
            for source, key in REF.findall(expr):
                c = claim_for(claims, source_path(source), key)
                if c is not None and f"claims:comparisons.{c.name}" not in expr:
                    out.append(f"{doc}:{i}: the marker {expr.strip()!r} words a verdict on {source}:{key} from one "
                               f"run's CI, but that is the claim {c.name} ({c.verdict} over the whole-chain runs); "
                               f"word it from claims:comparisons.{c.name}.verdict")
    return out


def check(paths: list[str], root: Path) -> list[str]:
    """Every problem of the given docs (markdown or the report PDF) against the claims file under `root`."""
    claims_path = root / CLAIMS
    if not claims_path.is_file():
        raise PipelineError(f"{CLAIMS}: no claims file under {root}; nothing to check verdicts against")
    claims = check_claims(json.loads(claims_path.read_text(encoding="utf-8")))[1]
    sources, problems = Sources(root), []
    for rel in paths:
        path = root / rel
        if not path.is_file():
            raise PipelineError(f"{rel}: no such file")
        found: list[Statement] = []
        if rel.endswith(".pdf"):
            for page, text in enumerate(pdf_pages(path), 1):
                found += statements(text, claims, rel, f" page {page}")
        else:
            raw = path.read_text(encoding="utf-8")
            rendered = regenerate(raw, rel, sources)
            problems += rendered.errors + marker_problems(raw, rel, claims)
            for line, unit in markdown_units(rendered.text):
                found += statements(unit, claims, rel, f":{line}")
        problems += [s.problem for s in found if s.problem]
        if rel in WHOLE_FAMILY:
            stated = {s.claim.name for s in found}
            problems += [f"{rel}: states no verdict for {c.name} ({c.label}); {CLAIMS} says: {statement(c)}"
                         for c in claims if c.name not in stated]
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Check every verdict the docs and the report state against "
                                             f"{CLAIMS}.")
    ap.add_argument("paths", nargs="+", help="README.md, docs/*.md, report/report.pdf (relative to --root)")
    ap.add_argument("--root", default=".", help="repository root (default: the working directory)")
    args = ap.parse_args(argv)
    try:
        problems = check(args.paths, Path(args.root))
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(problems) if problems else f"{len(args.paths)} files state the verdicts of {CLAIMS}",
          file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0

"""The judge-prompt loop (stage `judge_prompt`): calibrate the judge's PROMPT against the
reviews of the TRAIN split, freeze it, then read the held-out validation split once.

Why: the research tuned its judge prompt against human reviews (~50 revisions, kappa
0.37 -> 0.55); a loop that looked at validation while choosing would make the validation
kappa a training number. So:
- each revision is one edit of the prompt, scored by Cohen's kappa of the judge (one
  repeat) against the reference verdicts of reviewed TRAIN reflections only; a revision is
  kept only when train kappa rises by more than ``min_gain``;
- ``deterministic`` improver (default profile): among every one-step change of one
  directive (directives.DIRECTIVES, value +-1), the one with the highest train kappa (ties:
  directive order, then -1 before +1); it stops when no step gains more than ``min_gain``;
- ``endpoint`` improver (GPU profile): an instruct model reads the prompt and the train
  disagreements and answers one edit as JSON (a directive value or one instruction line);
- the final (best train kappa) prompt is frozen and validation is read ONCE: the read is
  recorded in a ledger (``validation_reads``) keyed by the validation set's fingerprint; a
  rerun with the same frozen prompt reuses the recorded read, and a read of the same
  validation set for a DIFFERENT prompt is refused (one line naming the ledger entry).
"""
from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from decision_pipeline.charter import store
from decision_pipeline.charter.agreement import LABELS, kappa_ci, paired_kappa_gain
from decision_pipeline.charter.charter import Charter, load_charter
from decision_pipeline.charter.directives import DIRECTIVES, JudgeRules, judge_rules, set_directive
from decision_pipeline.charter.judge import JudgeParams, judge_all, make_judge
from decision_pipeline.charter.prompts import Prompt, load_prompt, parse_prompt
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import read_json, write_text_atomic
from decision_pipeline.common.params import rule
from decision_pipeline.common.stats import cohen_kappa

IMPROVERS = ("deterministic", "endpoint")
FINAL = "final.md"
MAX_LINE_CHARS = 400


@dataclass
class JudgePromptParams:
    improver: str = rule(choices=IMPROVERS, doc="deterministic = one directive step per revision, the best by "
                                                "train kappa (CPU default); endpoint = an instruct model proposes")
    base_url: str = rule(doc="improver=endpoint: OpenAI-compatible /v1 URL of the improver model")
    model: str = rule(doc="improver=endpoint: improver model name")
    timeout_s: float = rule(min=0.1, doc="improver=endpoint: seconds per request")
    max_revisions: int = rule(min=0, max=100, doc="proposed prompt edits at most (the research: ~50)")
    min_gain: float = rule(min=0.0, max=1.0, doc="a revision is kept only when train kappa rises by more than "
                                                 "this (0.01 is about one of ~150 train reflections)")


# --------------------------------------------------------------------- reviews

def reference_verdicts(reflections: list[dict], export: Path) -> dict[str, str]:
    """Reference verdict per reviewed reflection from the review export (validated; thread
    overrides review; majority, ties reject: store.reference_verdicts)."""
    revs, coms = store.validate_records(store.read_records(export), known_annotations={r["id"] for r in reflections})
    return store.reference_verdicts(revs, coms)


def check_two_labels(reference: dict[str, str], ids: set[str], export: Path, split: str) -> None:
    """Kappa against a reference that uses one label is undefined (or 0 by construction):
    refuse it with one line naming the file."""
    labels = {reference[a] for a in reference if a in ids}
    if not labels:
        raise PipelineError(f"{export}: no reviewed reflection in the {split} split; review some (or raise "
                            "reviews.n_reflections) before calibrating the judge")
    if len(labels) == 1:
        raise PipelineError(f"{export}: every {split} reference verdict is '{labels.pop()}': kappa is undefined "
                            "with one label; review reflections the reviewers reject as well as accept (or check "
                            "the import)")


# ------------------------------------------------------------------- scoring

def score(verdicts: dict[str, str | None], reference: dict[str, str], ids: list[str]) -> dict:
    """kappa / concordance / n over the ids with both a judge verdict and a reference."""
    keys = [a for a in ids if verdicts.get(a) is not None]
    a, b = [verdicts[k] for k in keys], [reference[k] for k in keys]
    return {"kappa": cohen_kappa(a, b, labels=LABELS) if keys else None, "n": len(keys),
            "concordance": float(np.mean([x == y for x, y in zip(a, b)])) if keys else None}


def versioned(prompt: Prompt, template: str, charter: Charter, out_dir: Path) -> tuple[str, Prompt]:
    """(file text, checked Prompt) of the next revision of `prompt` with `template`."""
    version = prompt.version + 1
    text = f"---\nversion: {version}\n---\n{template}"
    return text, parse_prompt(text, charter, str(out_dir / f"v{version}.md"), kind="judge")


def step_candidates(rules: JudgeRules) -> list[tuple[str, int]]:
    """Every one-step directive change, in the documented tie-break order."""
    out = []
    for key, d in DIRECTIVES.items():
        now = getattr(rules, key)
        out += [(key, v) for v in (now - 1, now + 1) if d.lo <= v <= d.hi]
    return out


class DirectiveSearch:
    """Deterministic improver: the one-step directive change with the highest train kappa."""
    name = "deterministic"

    def propose(self, prompt: Prompt, harm_threshold: int, evaluate: Callable[[str], float | None],
                tried: list[dict]) -> tuple[dict, str] | None:
        rules = judge_rules(prompt.template, prompt.path, harm_threshold)
        best = None
        for key, value in step_candidates(rules):
            template = set_directive(prompt.template, key, value)
            k = evaluate(template)
            if k is not None and (best is None or k > best[0]):
                best = (k, {"directive": key, "from": getattr(rules, key), "to": value}, template)
        return None if best is None else (best[1], best[2])


class EndpointJudgeImprover:
    """An instruct model proposes one edit: JSON {"directive": key, "value": int} or {"line": text}."""
    name = "endpoint"

    def __init__(self, base_url: str, model: str, timeout_s: float):
        self.url, self.model, self.timeout_s = base_url.rstrip("/") + "/chat/completions", model, timeout_s

    def ask(self, prompt: Prompt, disagreements: dict, tried: list[dict]) -> dict:
        text = ("You improve the prompt of a judge that scores reflections; its agreement with human reviewers "
                "(Cohen's kappa on their accept/reject) must rise. Disagreements on the calibration reviews: "
                + json.dumps(disagreements) + ". Edits already tried: " + json.dumps(tried)
                + '. Answer only JSON: {"directive": <one of ' + json.dumps(list(DIRECTIVES))
                + '>, "value": <integer>} to change a directive, or {"line": <one instruction line to add>}. '
                "Never copy charter text into the prompt.\n\nPROMPT:\n" + prompt.template)
        body = {"model": self.model, "messages": [{"role": "user", "content": text}], "temperature": 0.0,
                "response_format": {"type": "json_object"}}
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                answer = json.loads(json.loads(resp.read())["choices"][0]["message"]["content"])
        except urllib.error.HTTPError as exc:
            raise PipelineError(f"judge-prompt improver {self.url} answered HTTP {exc.code}; check "
                                "judge_prompt.model") from None
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise PipelineError(f"judge-prompt improver {self.url} answered garbage or is unreachable "
                                f"({exc.__class__.__name__}); it must answer JSON {{\"directive\", \"value\"}} "
                                "or {\"line\"}") from None
        if not isinstance(answer, dict):
            raise PipelineError(f"judge-prompt improver {self.url}: the answer is not a JSON object")
        return answer

    def propose(self, prompt: Prompt, harm_threshold: int, evaluate: Callable[[str], float | None],
                tried: list[dict], disagreements: dict | None = None) -> tuple[dict, str] | None:
        answer = self.ask(prompt, disagreements or {}, tried)
        if "directive" in answer:
            key, value = answer.get("directive"), answer.get("value")
            if key not in DIRECTIVES or isinstance(value, bool) or not isinstance(value, int) \
                    or not DIRECTIVES[key].lo <= value <= DIRECTIVES[key].hi:
                raise PipelineError(f"judge-prompt improver {self.url}: directive {key!r} = {value!r} is not a known "
                                    f"directive with a value in its range ({', '.join(DIRECTIVES)})")
            now = getattr(judge_rules(prompt.template, prompt.path, harm_threshold), key)
            return {"directive": key, "from": now, "to": value}, set_directive(prompt.template, key, value)
        line = answer.get("line")
        if not isinstance(line, str) or not line.strip() or len(line) > MAX_LINE_CHARS \
                or line.strip().lower().startswith("directive:"):
            raise PipelineError(f"judge-prompt improver {self.url}: 'line' must be one non-empty instruction of at "
                                f"most {MAX_LINE_CHARS} characters (directives go as {{\"directive\", \"value\"}})")
        line = " ".join(line.split())
        return {"line": line}, prompt.template.rstrip("\n") + "\n" + line + "\n"


def make_improver(cfg: JudgePromptParams) -> DirectiveSearch | EndpointJudgeImprover:
    if cfg.improver == "endpoint":
        if not (cfg.base_url and cfg.model):
            raise PipelineError("judge_prompt.base_url and judge_prompt.model: the endpoint improver needs both")
        return EndpointJudgeImprover(cfg.base_url, cfg.model, cfg.timeout_s)
    return DirectiveSearch()


def disagreement_summary(rows: list[dict], verdicts: dict[str, str | None], reference: dict[str, str]) -> dict:
    """What the endpoint improver reads: judge-vs-review disagreements by safety score."""
    c: Counter = Counter()
    for r in rows:
        j = verdicts.get(r["id"])
        if j is not None and j != reference[r["id"]]:
            c[f"safety {r['safety_score']}: judge {j}, reviewers {reference[r['id']]}"] += 1
    return dict(sorted(c.items()))


# ----------------------------------------------------------------- the loop

def calibrate(prompt: Prompt, charter: Charter, train_rows: list[dict], reference: dict[str, str],
              verdicts_fn: Callable[[Prompt], dict[str, str | None]], improver, cfg: JudgePromptParams,
              harm_threshold: int, out_dir: Path) -> tuple[list[dict], list[dict], str, list[dict]]:
    """(history of kept revisions, rejected proposals, stop reason, the judge's train verdicts of
    the first and the final revision). Writes v{N}.md per kept revision into out_dir. Only train
    rows and their reference verdicts are ever scored here."""
    ids = [r["id"] for r in train_rows]
    memo: dict[str, dict] = {}

    def evaluate_template(template: str) -> dict:
        if template not in memo:
            _, p = versioned(prompt_now, template, charter, out_dir)
            v = verdicts_fn(p)
            memo[template] = {**score(v, reference, ids), "verdicts": v}
        return memo[template]

    prompt_now = prompt
    write_text_atomic(out_dir / f"v{prompt.version}.md", f"---\nversion: {prompt.version}\n---\n{prompt.template}")
    first = evaluate_template(prompt.template)
    history = [{"version": prompt.version, "prompt_file": f"v{prompt.version}.md", "edit": None,
                **{k: first[k] for k in ("kappa", "n", "concordance")}}]
    rejected: list[dict] = []
    stopped = "max_revisions"
    for _ in range(cfg.max_revisions):
        current = evaluate_template(prompt_now.template)
        extra = ({"disagreements": disagreement_summary(train_rows, current["verdicts"], reference)}
                 if isinstance(improver, EndpointJudgeImprover) else {})
        proposal = improver.propose(prompt_now, harm_threshold,
                                    lambda t: evaluate_template(t)["kappa"], history[1:] + rejected, **extra)
        if proposal is None:
            stopped = "no directive step left"
            break
        edit, template = proposal
        got = evaluate_template(template)
        gain = (got["kappa"] or -1.0) - (current["kappa"] or -1.0)
        if gain <= cfg.min_gain:
            rejected.append({**edit, "kappa": got["kappa"], "gain": gain})
            if isinstance(improver, DirectiveSearch):   # it proposed its best step: nothing better is left
                stopped = f"no directive step raises train kappa by more than min_gain {cfg.min_gain}"
                break
            continue
        text, prompt_now = versioned(prompt_now, template, charter, out_dir)
        write_text_atomic(out_dir / f"v{prompt_now.version}.md", text)
        history.append({"version": prompt_now.version, "prompt_file": f"v{prompt_now.version}.md", "edit": edit,
                        **{k: got[k] for k in ("kappa", "n", "concordance")}})
    return history, rejected, stopped, [first["verdicts"], evaluate_template(prompt_now.template)["verdicts"]]


# ------------------------------------------------------- the validation ledger

def validation_fingerprint(val_rows: list[dict], reference: dict[str, str]) -> str:
    """SHA-256 of the validation set: each reviewed reflection's id, text and reference verdict."""
    h = hashlib.sha256()
    for r in sorted(val_rows, key=lambda r: r["id"]):
        h.update(json.dumps([r["id"], r["reflection"], reference[r["id"]]]).encode())
    return h.hexdigest()


def load_ledger(path: Path) -> dict:
    """The ledger of validation reads ({"reads": [...]}); empty when the file does not exist."""
    if not path.exists():
        return {"reads": []}
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("reads"), list):
        raise PipelineError(f"{path}: not a validation-read ledger (expected {{\"reads\": [...]}}); restore it "
                            "from git")
    return data


def prior_read(ledger: dict, path: Path, fingerprint: str, prompt_sha: str) -> dict | None:
    """The recorded read of this validation set with this prompt (a rerun: reused, not read
    again); None when the set was never read; a refusal when it was read for another prompt."""
    for i, entry in enumerate(ledger["reads"]):
        if entry.get("validation_fingerprint") != fingerprint:
            continue
        if entry.get("prompt_sha256") == prompt_sha:
            return entry
        raise PipelineError(
            f"{path}: reads[{i}]: this validation set was already read for judge prompt version "
            f"{entry.get('prompt_version')} (sha256 {str(entry.get('prompt_sha256'))[:12]}, kappa "
            f"{entry.get('kappa')}); a second read for prompt sha256 {prompt_sha[:12]} would let validation choose "
            "between prompts: compare revisions by train kappa (the history), or review a fresh validation set; "
            "remove that entry only deliberately, in a commit that says why")
    return None


def run(cfg: JudgePromptParams, judge_cfg: JudgeParams, charter_path: str, reflections: list[dict], export: Path,
        n_resamples: int, confidence: float, seed: int, out_dir: Path, ledger_path: Path) -> tuple[dict, dict, bool]:
    """The whole stage: (metrics, updated ledger, whether the recorded read was reused). Writes v*.md
    and final.md into out_dir. The reuse flag stays out of the metrics so a forced rerun of the same
    state writes the same bytes."""
    charter = load_charter(charter_path)
    prompt = load_prompt(judge_cfg.prompt, charter, kind="judge")
    judge_rules(prompt.template, prompt.path, judge_cfg.checks.harm_threshold)   # a bad directive: before any work
    reference = reference_verdicts(reflections, export)
    rows = {r["id"]: r for r in reflections}
    train = [rows[a] for a in reference if rows[a]["split"] == "train"]
    val = [rows[a] for a in reference if rows[a]["split"] == "validation"]
    check_two_labels(reference, {r["id"] for r in train}, export, "train")
    check_two_labels(reference, {r["id"] for r in val}, export, "validation")
    one = replace(judge_cfg, repeats=1)
    backend = make_judge(one, charter)

    def verdicts_on(items: list[dict]) -> Callable[[Prompt], dict[str, str | None]]:
        return lambda p: {j["annotation_id"]: j["verdict"] for j in judge_all(backend, items, p, charter, one)}

    history, rejected, stopped, (start_v, final_v) = calibrate(
        prompt, charter, train, reference, verdicts_on(train), make_improver(cfg), cfg,
        judge_cfg.checks.harm_threshold, out_dir)
    final_text = (out_dir / history[-1]["prompt_file"]).read_text(encoding="utf-8")
    write_text_atomic(out_dir / FINAL, final_text)
    final = parse_prompt(final_text, charter, str(out_dir / FINAL), kind="judge")
    train_ids = sorted(r["id"] for r in train)
    ci = {k: kappa_ci(*_pairs(v, reference, train_ids), n_resamples, confidence, seed)
          for k, v in (("start", start_v), ("final", final_v))}
    gain = paired_kappa_gain(reference, start_v, final_v, train_ids, n_resamples, confidence, seed)

    fingerprint = validation_fingerprint(val, reference)
    prompt_sha = hashlib.sha256(final_text.encode()).hexdigest()
    ledger = load_ledger(ledger_path)
    entry = prior_read(ledger, ledger_path, fingerprint, prompt_sha)
    reused = entry is not None
    if entry is None:   # the one read of validation
        v = verdicts_on(val)(final)
        got = kappa_ci(*_pairs(v, reference, sorted(r["id"] for r in val)), n_resamples, confidence, seed)
        entry = {"validation_fingerprint": fingerprint, "prompt_sha256": prompt_sha, "prompt_version": final.version,
                 "judge": judge_cfg.name, **{k: got[k] for k in ("kappa", "ci_low", "ci_high", "concordance", "n")}}
        ledger = {"reads": [*ledger["reads"], entry]}
    rules = judge_rules(final.template, final.path, judge_cfg.checks.harm_threshold)
    metrics = {
        "judge": judge_cfg.name, "judge_kind": judge_cfg.kind, "improver": cfg.improver,
        "stand_in": judge_cfg.kind == "rules",
        "note": ("rule stand-in judge following its prompt's directive lines (not a language model); "
                 "kappa against simulated reviews" if judge_cfg.kind == "rules" else "LLM judge"),
        "start_version": prompt.version, "final_version": final.version, "revisions": len(history) - 1,
        "stopped": stopped, "min_gain": cfg.min_gain, "final_directives": rules.__dict__,
        "history": history, "rejected": rejected,
        "train": {"n": len(train_ids), "kappa_start": ci["start"]["kappa"], "kappa_final": ci["final"]["kappa"],
                  "ci_start": [ci["start"]["ci_low"], ci["start"]["ci_high"]],
                  "ci_final": [ci["final"]["ci_low"], ci["final"]["ci_high"]], "gain": gain},
        "validation": {**{k: entry[k] for k in ("kappa", "ci_low", "ci_high", "concordance", "n", "prompt_version")},
                       "reads": 1, "fingerprint": fingerprint,
                       "rule": "read once, after the prompt was frozen; never used to choose a revision"},
    }
    return metrics, ledger, reused


def _pairs(verdicts: dict[str, str | None], reference: dict[str, str], ids: list[str]) -> tuple[list, list]:
    keys = [a for a in ids if verdicts.get(a) is not None]
    return [verdicts[k] for k in keys], [reference[k] for k in keys]

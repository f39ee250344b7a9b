"""Prompt files: one per candidate (and one for the LLM judge), each with a version number.

Why: a prompt revision is an experiment (``dvc exp run -S``) compared by kappa and
accept rate, so the version must travel with the text; and prompts must not carry
charter text: ``{charter}`` is substituted from the charter file, so a charter edit
reaches every prompt and no prompt drifts from it.

File format: a front-matter block ``---\\nversion: N\\n---`` then the template, which
must contain ``{charter}`` and may contain ``{document}``, ``{reflection}``,
``{safety_score}``. Pasted charter text (any run of PASTE_WORDS consecutive words of a
section body) is rejected, as is a citation to a section the charter lacks.

Encoding: UTF-8 without a byte-order mark (the rule of common/textfile.py); a BOM, UTF-16 or a
byte that is not UTF-8 is named as such instead of surfacing as "missing front matter".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


from decision_pipeline.charter.charter import Charter, check_citations
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.textfile import SAVE_AS, read_text
from decision_pipeline.common.yamlio import load_yaml

PASTE_WORDS = 8
PLACEHOLDERS = ("charter", "document", "reflection", "safety_score")
# what each kind of prompt must show the model: a reflection prompt without {document} (or a judge
# prompt without {reflection}) runs, and the model never sees the text it is asked about
REQUIRED = {"reflection": ("charter", "document"), "judge": ("charter", "document", "reflection")}
_ANY_CASE = re.compile(r"\{([A-Za-z_]+)\}")
_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Prompt:
    """A loaded, checked prompt template."""
    path: str
    version: int
    template: str

    def render(self, charter: Charter, **fields: object) -> str:
        """The template with {charter} and the given fields substituted (other braces kept)."""
        values = {"charter": charter_block(charter), **{k: str(v) for k, v in fields.items()}}
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), self.template)


def charter_block(charter: Charter) -> str:
    """The charter as prompts receive it: one line per section, ``[X.Y] Title. Text``."""
    return "\n".join(f"[{s.id}] {s.title}. {s.text}" for s in charter.sections.values())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def pasted_charter_text(template: str, charter: Charter) -> str | None:
    """The first run of PASTE_WORDS words shared with a charter section body, or None."""
    words = _words(template)
    grams = {tuple(words[i:i + PASTE_WORDS]) for i in range(len(words) - PASTE_WORDS + 1)}
    for section in charter.sections.values():
        sw = _words(section.text)
        for i in range(len(sw) - PASTE_WORDS + 1):
            if tuple(sw[i:i + PASTE_WORDS]) in grams:
                return f"[{section.id}] '{' '.join(sw[i:i + PASTE_WORDS])}'"
    return None


def parse_prompt(text: str, charter: Charter, source: str, kind: str = "reflection") -> Prompt:
    """Check and parse prompt text (see module docstring); errors name `source`."""
    if text.startswith("\ufeff"):
        raise PipelineError(f"{source}: starts with a byte-order mark (UTF-8 BOM); {SAVE_AS}")
    text = text.replace("\r\n", "\n")  # Windows line endings read as LF, as a text-mode read did before
    m = _FRONT.match(text)
    if not m:
        raise PipelineError(f"{source}: missing front matter; start the file with '---\\nversion: 1\\n---'")
    meta = load_yaml(m.group(1), f"{source}: front matter") or {}
    version = meta.get("version") if isinstance(meta, dict) else None
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise PipelineError(f"{source}: front matter needs 'version: N' (an integer >= 1), got {version!r}")
    template = text[m.end():]
    if "{charter}" not in template:
        raise PipelineError(f"{source}: no {{charter}} placeholder; prompts take the charter from "
                            "configs/charter/charter.md through {charter}")
    miscased = sorted(n for n in set(_ANY_CASE.findall(template)) if n != n.lower() and n.lower() in PLACEHOLDERS)
    if miscased:
        raise PipelineError(f"{source}: placeholder {{{miscased[0]}}} is mis-cased; write {{{miscased[0].lower()}}}")
    unknown = sorted(set(_PLACEHOLDER.findall(template)) - set(PLACEHOLDERS))
    if unknown:
        raise PipelineError(f"{source}: unknown placeholder {{{unknown[0]}}}; known: "
                            + ", ".join("{" + p + "}" for p in PLACEHOLDERS))
    missing = [n for n in REQUIRED[kind] if "{" + n + "}" not in template]
    if missing:
        raise PipelineError(f"{source}: a {kind} prompt needs the {{{missing[0]}}} placeholder; add it where the "
                            f"model should see the {missing[0].replace('_', ' ')}")
    pasted = pasted_charter_text(template, charter)
    if pasted:
        raise PipelineError(f"{source}: pastes charter text {pasted}; remove it and rely on {{charter}}")
    check_citations(template.replace("{charter}", ""), charter, source)
    return Prompt(source, version, template)


def load_prompt(path: str | Path, charter: Charter, kind: str = "reflection") -> Prompt:
    """Read and check a prompt file of `kind` (reflection or judge: see REQUIRED)."""
    p = Path(path)
    text = read_text(p, missing="prompt file not found; fix the prompt path in params")
    return parse_prompt(text, charter, str(p), kind)

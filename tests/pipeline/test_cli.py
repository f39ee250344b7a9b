"""`python -m decision_pipeline <verb>`: the one command-line entry point of the library (issue 55).

Why: library modules are import-only, so every command line in the Makefile, scripts/, the workflows
and the docs goes through a verb; a moved module then needs one edit in the verb table, and a command
line naming a module (or a verb that does not exist) is caught here instead of by a person running it.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from decision_pipeline.__main__ import VERBS, main

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "decision_pipeline"
COMMAND = re.compile(r"-m\s+(decision_pipeline(?:\.[\w.]+)?)(?:\s+([\w-]+))?")
LIST_COMMAND = re.compile(r'"-m",\s*"(decision_pipeline(?:\.[\w.]+)?)"(?:,\s*"([\w-]+)")?')


def test_help_lists_every_verb_without_loading_a_tool():
    """`--help` in a fresh interpreter: every verb with its line, and none of the heavy libraries imported."""
    probe = ("import sys, runpy\nsys.argv = ['decision_pipeline', '--help']\n"
             "try:\n    runpy.run_module('decision_pipeline', run_name='__main__', alter_sys=True)\n"
             "except SystemExit as e:\n    code = e.code\n"
             "heavy = sorted(m for m in ('torch', 'transformers', 'matplotlib', 'numpy', 'dvc') if m in sys.modules)\n"
             "print('EXIT', code, 'HEAVY', heavy)\n")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "EXIT 0 HEAVY []", proc.stdout[-500:]
    for verb, (_, _, line) in VERBS.items():
        assert re.search(rf"^  {re.escape(verb)} +{re.escape(line)}$", proc.stdout, re.M), verb


def test_every_verb_names_a_function_that_takes_argv():
    for verb, (module, function, line) in VERBS.items():
        path = LIB.parent.joinpath(*module.split(".")).with_suffix(".py")
        assert path.is_file(), f"{verb}: {module} is not a module file"
        defs = {n.name: n for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.FunctionDef)}
        assert function in defs, f"{verb}: {module} has no top-level {function}()"
        assert defs[function].args.args, f"{verb}: {module}.{function}() takes no argv"
        assert line and "\n" not in line and len(line) <= 140, verb


def test_library_modules_are_import_only():
    """No `if __name__ == "__main__"` block and no package __main__.py but the dispatcher's."""
    found = []
    for path in sorted(LIB.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "decision_pipeline/__main__.py":
            continue
        if path.name == "__main__.py":
            found.append(f"{rel} (a package entry point: add a verb instead)")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                found.append(f"{rel}:{node.lineno}")
    assert not found, "command-line blocks in library modules; add a verb to decision_pipeline/__main__.py:\n" \
                      + "\n".join(found)


def test_unknown_verb_and_no_verb_exit_2(capsys):
    assert main(["no-such-verb"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-verb" in err[0] and "--help" in err[0]
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


def test_a_verb_gets_its_arguments_and_its_name(capsys, monkeypatch):
    """The verb's function receives the arguments after the verb; argparse names the verb in usage lines."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))      # the dispatcher sets argv[0] for argparse
    with pytest.raises(SystemExit) as exit_info:          # an unknown option: argparse's exit 2
        main(["codedeps", "--root", str(ROOT), "--bogus"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "usage: python -m decision_pipeline codedeps" in err and "--bogus" in err


def _command_files() -> list[Path]:
    files = [ROOT / "Makefile", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / ".github").rglob("*.yml")), *sorted((ROOT / "scripts").glob("*")),
             *sorted((ROOT / "perf").glob("*.py")), *sorted((ROOT / "tests").rglob("*.py")), *sorted(LIB.rglob("*.py"))]
    return [p for p in files if p.is_file()]


def test_every_command_line_names_a_verb():
    """Makefile, workflows, scripts, docs, tests and messages run `python -m decision_pipeline <verb>`."""
    bad = []
    for path in _command_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for pattern in (COMMAND, LIST_COMMAND):
            for m in pattern.finditer(text):
                module, verb = m.group(1), m.group(2)
                if module != "decision_pipeline" or (verb and not verb.startswith("-") and verb not in VERBS):
                    line = text.count("\n", 0, m.start()) + 1
                    bad.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)}")
    assert not bad, "command lines that name a module or no known verb:\n" + "\n".join(bad)


SUBCOMMAND = re.compile(r"-m\s+decision_pipeline\s+([\w-]+)\s+([a-z][\w-]*)")
CHOICES = re.compile(r"\{([\w,-]+)\}")
REFUSED = {("profiles", "apply")}  # kept for its one-line pointer at `config profile`


def test_every_subcommand_is_one_the_verb_offers():
    """A workflow line with a subcommand the verb lacks only fails on the machine that runs it, so the
    verb's own --help decides here; `profiles apply` exists only to refuse and point at `config profile`
    (pr.yml ran it and stopped with exit 2, issue 53), so a command line may not use it either."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for path in _command_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in SUBCOMMAND.finditer(text):
            verb, word = m.group(1), m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            seen.setdefault(verb, set()).add((word, f"{path.relative_to(ROOT)}:{line}"))
    bad, checked = [], 0
    for verb in sorted(v for v in seen if v in ("config", "profiles", "preflight", "review-ui", "s1mb")):
        out = subprocess.run([sys.executable, "-m", "decision_pipeline", verb, "--help"], capture_output=True,
                             text=True, cwd=ROOT, timeout=120)
        found = CHOICES.search(out.stdout)
        assert found, f"{verb} --help lists no subcommands: {out.stdout[:300]!r}"
        choices = set(found.group(1).split(","))
        for word, where in sorted(seen[verb]):
            checked += 1
            if word not in choices or (verb, word) in REFUSED:
                bad.append(f"{where}: {verb} {word} (offers {', '.join(sorted(choices))})")
    assert checked, "no subcommand lines found: the pattern no longer matches the command lines"
    assert not bad, "subcommands the verb does not offer:\n" + "\n".join(bad)

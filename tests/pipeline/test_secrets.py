"""No tracked file holds a credential, and per-checkout credential files stay out of git."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = {
    "AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "AWS secret access key": re.compile(r"(?i)aws_?secret_?access_?key\s*[:=]\s*['\"]?[A-Za-z0-9/+=]{40}\b"),
    "Hugging Face token": re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),
    "OpenAI-style key": re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}\b"),
    "private key": re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP )?PRIVATE KEY-----"),
}


def find_secrets(text: str) -> list[str]:
    return [name for name, pattern in PATTERNS.items() if pattern.search(text)]


def _tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


# the samples are assembled at run time so this file itself holds no credential-looking string
@pytest.mark.parametrize("sample, kind", [
    ("key = " + "AKIA" + "IOSFODNN7EXAMPLE", "AWS access key id"),
    ("aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY", "AWS secret access key"),
    ("token: " + "hf" + "_abcdefghijklmnopqrstuvwxyzABCDEF12", "Hugging Face token"),
    ("OPENAI_API_KEY=" + "sk" + "-proj-abcdefghijklmnopqrstuvwx", "OpenAI-style key"),
    ("-----BEGIN OPENSSH " + "PRIVATE KEY-----", "private key"),
])
def test_the_scanner_finds_each_kind(sample, kind):
    assert find_secrets(sample) == [kind]


def test_no_tracked_file_holds_a_credential():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    hits = []
    for path in _tracked_files():
        if not path.is_file() or path.stat().st_size > 5_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [f"{path.relative_to(ROOT)}: {kind}" for kind in find_secrets(text)]
    assert not hits, f"credential-looking strings in tracked files: {hits}"


def test_local_dvc_config_is_ignored():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in (".dvc/config.local", ".env"):
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0
        assert ignored, f"{path} is not git-ignored; credentials written there would be committed"

"""`make pull`: say in one line when the DVC remote cannot be reached, before DVC's own error.

Why: the project's default remote is a local S3 endpoint (`make s3-local`); no
public remote holds its models and data. In a fresh clone `dvc pull` fails with
one "missing cache" line per output (23 of them), which reads like a broken
repository. This checks the default remote first (a TCP connect to an S3
endpoint, or a local directory's presence) and, when nothing answers, says what
a newcomer can do instead; when the remote answers it runs `dvc pull` as is.
"""
from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

HINT = ("this project publishes no remote with its models and data: `make run` builds them all locally "
        "(29 minutes on a quiet 2-core machine, 50 on a shared one), or point the remote at your own storage "
        "(docs/reliability.md#remote-storage-s3-compatible)")


def default_remote(root: Path) -> tuple[str, dict] | None:
    """(name, settings) of the default remote from DVC's merged config, or None when there is none."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        config = repo.config
        name = config.get("core", {}).get("remote")
        if not name:
            return None
        return name, dict(config.get("remote", {}).get(name, {}))


def unreachable(settings: dict, timeout: float = 2.0) -> str | None:
    """Why the remote cannot be reached (one clause), or None when it answers or cannot be checked cheaply."""
    url = str(settings.get("url", ""))
    endpoint = settings.get("endpointurl")
    if endpoint:
        parsed = urlparse(str(endpoint))
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            with socket.create_connection((parsed.hostname or "localhost", port), timeout=timeout):
                return None
        except OSError as exc:
            return f"nothing answers at {endpoint} ({exc.strerror or exc})"
    scheme = urlparse(url).scheme
    if scheme in ("", "file") and not Path(urlparse(url).path or url).is_dir():
        return f"the directory {url} does not exist"
    return None                                # cloud URLs: let DVC try (credentials decide)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("--check-only", action="store_true", help="check the remote, do not pull")
    args, dvc_args = ap.parse_known_args(argv)
    remote = default_remote(Path(args.root))
    if remote is None:
        print(f"make pull: no default DVC remote is configured; {HINT}", file=sys.stderr)
        return 1
    name, settings = remote
    why = unreachable(settings)
    if why:
        print(f"make pull: DVC remote '{name}' ({settings.get('url')}) is not reachable: {why}; {HINT}",
              file=sys.stderr)
        return 1
    if args.check_only:
        print(f"make pull: DVC remote '{name}' answers")
        return 0
    return subprocess.call([sys.executable, "-m", "dvc", "pull", *dvc_args], cwd=args.root)


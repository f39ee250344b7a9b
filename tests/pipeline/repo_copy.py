"""A throwaway git + DVC copy of the repository, and commands run in it with no user config.

Why: tests that run `dvc` must never touch the real checkout (another run may own its
dvc.lock and outputs) nor read a developer's AWS, proxy, git or DVC settings.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from decision_pipeline.common.profiles import dump, merged_profile

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
ISOLATE_FROM = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE",
                "AWS_SHARED_CREDENTIALS_FILE", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")


def run(cmd: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run `cmd` in the copy with the venv first on PATH and isolated DVC/git identity."""
    isolated = cwd.parent / "dvc-user-config"
    isolated.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ISOLATE_FROM}
    env.update({"DVC_GLOBAL_CONFIG_DIR": str(isolated), "DVC_SYSTEM_CONFIG_DIR": str(isolated),
                "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "PIPELINE_QUIET": "1",
                "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def copy_repo(dest: Path, profile: str = "micro") -> Path:
    """The tracked (and untracked, not ignored) files without recorded results, `profile` as
    params.yaml, committed once: what a fresh clone about to run its first stage looks like."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for rel in files:
        if rel.startswith(("metrics/", "plots/", "report/")) or rel.rsplit("/", 1)[-1] == "dvc.lock" or not (ROOT / rel).is_file():
            if rel != "metrics/curate_ablation.json":   # an input of the report (dvc exp results), not an output
                continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    (dest / "params.yaml").write_text(dump(merged_profile(profile, ROOT)))
    run(["git", "init", "-q"], dest)
    run(["git", "add", "-A"], dest)
    run(["git", "commit", "-qm", "init"], dest)
    return dest

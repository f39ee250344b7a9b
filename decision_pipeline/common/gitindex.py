"""Keep `git status` truthful about params.yaml after `dvc exp run -S`.

Why: in the workspace, `dvc exp run -S k=v` stashes the edit (git writes the committed params.yaml
back and records its size and mtime in the index), re-applies the stash (the edited file, often the
same size, written within the same second) and, when the run ends (failed or not), resets the index
to HEAD with libgit2, which keeps that recorded size and mtime because the blob id matches. Git
compares size and whole seconds only, so it then believes the edited file is the committed one:
`git status` is clean, `git checkout -- .` restores nothing, and the next run silently uses the
edited value (5 of 10 tries here with `-S items.splits.pool=-0.1`, 0.45 and -0.1 being 4 bytes each).

The fix at the right depth would be in scmrepo/libgit2 (smudge racily clean entries when resetting).
Until then every stage, when it runs inside an experiment (DVC sets DVC_EXP_BASELINE_REV), re-adds
the params file's index entry with the same blob and no stat data (`git update-index --cacheinfo`).
That changes nothing staged; it only makes git hash the file on its next look.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

EXP_ENV = "DVC_EXP_BASELINE_REV"


def forget_index_stat(path: str | Path) -> bool:
    """Drop the cached stat of `path`'s git index entry (inside `dvc exp run` only); True if done.

    Never fails the caller: no git, no repository, an untracked file or a busy index lock leave
    everything as it was."""
    if EXP_ENV not in os.environ:
        return False
    path = Path(path).resolve()
    cwd, name = path.parent, path.name
    try:
        listed = subprocess.run(["git", "ls-files", "-s", "--", name], cwd=cwd, capture_output=True,
                                text=True, timeout=10)
        fields = listed.stdout.split()
        if listed.returncode != 0 or len(fields) != 4 or fields[2] != "0":
            return False
        mode, blob = fields[0], fields[1]
        done = subprocess.run(["git", "update-index", "--cacheinfo", f"{mode},{blob},{name}"], cwd=cwd,
                              capture_output=True, text=True, timeout=10)
        return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False

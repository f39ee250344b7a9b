"""`make pull` says in one line that the remote is unreachable, before DVC's own errors."""
from __future__ import annotations

import socket

from decision_pipeline.common import pull


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_closed_endpoint_is_named_and_an_open_one_passes(tmp_path):
    port = _free_port()
    why = pull.unreachable({"url": "s3://b/cache", "endpointurl": f"http://127.0.0.1:{port}"}, timeout=0.5)
    assert why is not None and f"127.0.0.1:{port}" in why
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        ok = pull.unreachable({"url": "s3://b/cache", "endpointurl": f"http://127.0.0.1:{srv.getsockname()[1]}"})
    assert ok is None
    assert "does not exist" in pull.unreachable({"url": str(tmp_path / "nope")})
    assert pull.unreachable({"url": str(tmp_path)}) is None
    assert pull.unreachable({"url": "s3://real-bucket/x"}) is None        # cloud: DVC and credentials decide


def test_main_prints_one_line_and_exits_1_without_running_dvc(tmp_path, capsys):
    from dvc.repo import Repo

    Repo.init(str(tmp_path), no_scm=True)
    (tmp_path / ".dvc/config").write_text(
        f"[core]\n    no_scm = True\n    remote = storage\n['remote \"storage\"']\n    url = s3://b/cache\n"
        f"    endpointurl = http://127.0.0.1:{_free_port()}\n")
    assert pull.main(["--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'storage'" in err[0] and "make run" in err[0]

"""What `dvc push` / `dvc pull` do when the S3 remote misbehaves, against a real moto server.

Each test builds a tiny DVC repo in tmp_path and runs the venv's `dvc` CLI as a
subprocess with no user-level AWS, proxy, git or DVC config (HOME points into
tmp_path). The server is `decision_pipeline.common.local_s3` on 127.0.0.1; its
objects live in this process, so stopping and restarting it on the same port
keeps what was pushed, which is what lets the tests tell "nothing recorded as
pushed" apart from "the server forgot". Faults covered: server down before a
push, the connection dying in the middle of a multipart upload, wrong
credentials (moto's IAM authentication switched on), a missing bucket, and a
multipart-sized file round-tripping byte-identical.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import numpy as np
import pytest
import yaml
from moto.core.authorization import enable_iam_authentication

from decision_pipeline.common import local_s3

DVC = str(Path(sys.executable).parent / "dvc")
BUCKET = local_s3.DEFAULT_BUCKET
# s3fs (dvc-s3's backend) switches to multipart at 2 x 50 MiB chunks; dvc-s3 3.3 ignores the
# remote's multipart_chunksize/threshold options, so the file must exceed 100 MiB: 3 parts
BIG_BYTES = 110 * 2**20
DROP_ENV_PREFIXES = ("AWS_", "DVC_")
DROP_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
            "GIT_DIR", "GIT_WORK_TREE")


def _env(home: Path, creds: dict[str, str]) -> dict[str, str]:
    """The caller's environment minus AWS/DVC/proxy settings, with HOME and DVC's config dirs in tmp."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(DROP_ENV_PREFIXES) and k not in DROP_ENV}
    return {**base, **creds, "HOME": str(home), "DVC_GLOBAL_CONFIG_DIR": str(home / "dvc-global"),
            "DVC_SYSTEM_CONFIG_DIR": str(home / "dvc-system"), "DVC_SITE_CACHE_DIR": str(home / "dvc-site"),
            "AWS_CONFIG_FILE": str(home / "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-creds"),
            "DVC_NO_ANALYTICS": "1", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


class Repo:
    """A git+DVC repo in tmp_path whose default remote is s3://<bucket>/<prefix> on a local endpoint."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.home = root, home
        self.creds = dict(local_s3.LOCAL_CREDENTIALS)

    def run(self, *args: str, check: bool = True, creds: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        cmd = [DVC, *args[1:]] if args[0] == "dvc" else list(args)
        proc = subprocess.run(cmd, cwd=self.root, env=_env(self.home, creds or self.creds), capture_output=True,
                              text=True, timeout=180)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def cloud_status(self) -> dict[str, str]:
        """`dvc status -c --json`: {} when the remote holds everything, else {path: "new" | ...}."""
        return json.loads(self.run("dvc", "status", "-c", "--json").stdout or "{}")

    def point_at(self, port: int, url: str) -> None:
        self.run("dvc", "remote", "modify", "storage", "endpointurl", f"http://127.0.0.1:{port}")
        self.run("dvc", "remote", "modify", "storage", "url", url)


def _error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("ERROR")]


def _client(port: int, key: str = "local", secret: str = "local"):
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret)


def _keys(port: int, prefix: str) -> list[str]:
    return [o["Key"] for o in _client(port).list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def server() -> Iterator[dict]:
    """A moto server on a free port; tests may stop it and start it again on the same port."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    srv, port = local_s3.start(0)
    state = {"server": srv, "port": port}
    yield state
    if state["server"] is not None:
        state["server"].stop()


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """git init + dvc init, a file and a directory tracked with `dvc add`, a default remote `storage`, committed:
    built once with the real CLIs, then copied for each test (every test points the remote at its own server
    and prefix with `point_at` before it talks to S3)."""
    base = tmp_path_factory.mktemp("s3_faults_template")
    root, home = base / "repo", base / "home"
    root.mkdir()
    home.mkdir()
    r = Repo(root, home)
    r.run("git", "init", "-q")
    r.run("dvc", "init", "-q")
    (root / "notes.txt").write_text("remote fault tests\n")
    (root / "data").mkdir()
    for i in range(3):
        (root / "data" / f"part{i}.csv").write_text("".join(f"{i},{j}\n" for j in range(100)))
    r.run("dvc", "add", "-q", "notes.txt", "data")
    r.run("dvc", "remote", "add", "-d", "storage", f"s3://{BUCKET}/template")
    r.run("git", "add", "-A")
    r.run("git", "commit", "-qm", "tracked files")
    return root


@pytest.fixture
def repo(tmp_path, template) -> Repo:
    """A copy of the template repo (its cache, index and git history) with a fresh HOME of its own."""
    root, home = tmp_path / "repo", tmp_path / "home"
    shutil.copytree(template, root, symlinks=True)
    home.mkdir()
    return Repo(root, home)


TRACKED = {"notes.txt", "data", "data/part0.csv", "data/part1.csv", "data/part2.csv"}


def test_push_with_server_down_fails_and_records_nothing_then_succeeds_when_back(repo, server, request):
    port, prefix = server["port"], request.node.name + "/"
    repo.point_at(port, f"s3://{BUCKET}/{request.node.name}")
    server["server"].stop()  # the port now refuses connections
    server["server"] = None
    t0 = time.monotonic()
    failed = repo.run("dvc", "push", check=False)
    seconds_to_fail = time.monotonic() - t0
    assert failed.returncode != 0
    errors = _error_lines(failed)
    assert len(errors) == 1, failed.stderr
    assert "Could not connect to the endpoint URL" in errors[0] and f"127.0.0.1:{port}" in errors[0]
    assert seconds_to_fail < 60  # s3fs/botocore retry, then give up
    print(f"\nserver down: push failed after {seconds_to_fail:.1f}s")

    server["server"], again = local_s3.start(port)  # the same endpoint comes back
    assert again == port
    assert _keys(port, prefix) == []  # nothing half-written under the remote prefix
    assert repo.cloud_status() == {path: "new" for path in TRACKED}  # DVC does not think anything was pushed

    pushed = repo.run("dvc", "push")
    assert "5 files pushed" in pushed.stdout
    assert repo.cloud_status() == {}
    assert len(_keys(port, prefix)) == 5  # notes.txt, 3 csv files, the directory's .dir listing


class CutLink:
    """A TCP relay in front of the server that drops every connection once `cut_after` bytes went upstream.

    Stopping moto's werkzeug server does not close keep-alive connections that are already
    open, so a push in flight would carry on; cutting the relay is a real mid-transfer outage.
    """

    def __init__(self, upstream_port: int, cut_after: int) -> None:
        self.upstream, self.cut_after, self.sent = upstream_port, cut_after, 0
        self.lock, self.conns, self.cut = threading.Lock(), [], threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.cut.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            with self.lock:
                self.conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, counts: bool) -> None:
        try:
            while chunk := src.recv(1 << 16):
                dst.sendall(chunk)
                if counts:
                    with self.lock:
                        self.sent += len(chunk)
                        over = self.sent >= self.cut_after
                    if over:
                        self.close()
                        return
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Refuse new connections and reset the open ones, as a crashed server would."""
        self.cut.set()
        self.listener.close()
        with self.lock:
            for sock in self.conns:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    sock.close()  # linger 0: RST, like a dead peer
                except OSError:
                    pass


@pytest.mark.slow
def test_multipart_file_survives_a_cut_mid_upload_and_round_trips_byte_identical(repo, server, request):
    port, prefix = server["port"], request.node.name + "/"
    big = repo.root / "big.bin"
    big.write_bytes(np.random.default_rng(15).bytes(BIG_BYTES))
    digest = _sha(big)
    repo.run("dvc", "add", "-q", "big.bin")
    link = CutLink(port, cut_after=75 * 2**20)  # inside the second 50 MiB part
    repo.point_at(link.port, f"s3://{BUCKET}/{request.node.name}")
    t0 = time.monotonic()
    failed = repo.run("dvc", "push", check=False)
    seconds_to_fail = time.monotonic() - t0
    link.close()
    assert link.cut.is_set() and failed.returncode != 0
    big_md5 = yaml.safe_load((repo.root / "big.bin.dvc").read_text())["outs"][0]["md5"]
    # one line per object in flight when the link died (named by hash, not path), then one summary line;
    # which small objects were in flight depends on DVC's scheduling
    *per_object, summary = _error_lines(failed)
    assert any(f"failed to transfer '{big_md5}'" in line for line in per_object), failed.stderr
    assert all("Could not connect to the endpoint URL" in line for line in per_object), failed.stderr
    assert summary == f"ERROR: failed to push data to the cloud - {len(per_object)} files failed to upload"
    # the big file never became an object: S3 only shows a multipart upload once it is completed
    big_key = f"{prefix}files/md5/{big_md5[:2]}/{big_md5[2:]}"
    assert big_key not in _keys(port, prefix)
    # the aborted upload's parts stay on the server (a dead server cannot be told to abort): on real S3
    # a lifecycle rule AbortIncompleteMultipartUpload reclaims them
    open_uploads = _client(port).list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", [])
    assert [u["Key"] for u in open_uploads] == [big_key]
    for key in _keys(port, prefix):  # content-addressed: whatever did land is whole
        body = _client(port).get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert hashlib.md5(body).hexdigest() == key.split("/")[-2] + key.split("/")[-1].removesuffix(".dir")
    repo.point_at(port, f"s3://{BUCKET}/{request.node.name}")  # the server is reachable again
    assert repo.cloud_status().get("big.bin") == "new"  # not recorded as pushed

    t0 = time.monotonic()
    repo.run("dvc", "push")
    seconds_push = time.monotonic() - t0
    assert repo.cloud_status() == {}
    etag = _client(port).head_object(Bucket=BUCKET, Key=big_key)["ETag"]
    assert etag.strip('"').endswith("-3"), etag  # stored through a 3-part multipart upload

    shutil.rmtree(repo.root / ".dvc" / "cache")  # a fresh machine: no cache, no workspace copy
    big.unlink()
    t0 = time.monotonic()
    repo.run("dvc", "pull")
    seconds_pull = time.monotonic() - t0
    assert _sha(big) == digest
    assert repo.run("dvc", "status", "--json").stdout.strip() in ("", "{}")
    print(f"\n110 MiB: cut push failed (exit {failed.returncode}) in {seconds_to_fail:.1f}s, push {seconds_push:.1f}s, pull {seconds_pull:.1f}s")


def _iam_user_keys(port: int) -> dict[str, str]:
    """An IAM user allowed s3:* and its access key, created before authentication is switched on."""
    iam = boto3.client("iam", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                       aws_access_key_id="local", aws_secret_access_key="local")
    user = f"dvc-faults-{port}"  # moto's state outlives one server in this process
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
            "AWS_DEFAULT_REGION": "us-east-1"}


def test_wrong_credentials_fail_with_one_line_and_right_ones_work(repo, server, request):
    port, prefix = server["port"], request.node.name + "/"
    repo.point_at(port, f"s3://{BUCKET}/{request.node.name}")
    good = _iam_user_keys(port)
    with enable_iam_authentication():  # moto now checks signatures against IAM, as S3 does
        for bad in ({**good, "AWS_SECRET_ACCESS_KEY": "not-the-secret"},
                    {**good, "AWS_ACCESS_KEY_ID": "UNKNOWNACCESSKEYID00"}):
            t0 = time.monotonic()
            failed = repo.run("dvc", "push", check=False, creds=bad)
            print(f"\nwrong credentials: push failed after {time.monotonic() - t0:.1f}s")
            assert failed.returncode != 0
            errors = _error_lines(failed)
            assert len(errors) == 1, failed.stderr
            # DVC's HEAD request gets a body-less 403, so the line cannot name the bad key: see README
            assert "Forbidden" in errors[0] and "403" in errors[0], errors[0]
        assert repo.run("dvc", "status", "-c", "--json", creds=good).stdout.strip() != "{}"
        repo.run("dvc", "push", creds=good)  # the same repo and server accept the right keys
        assert json.loads(repo.run("dvc", "status", "-c", "--json", creds=good).stdout or "{}") == {}
    assert len(_keys(port, prefix)) == 5


def test_missing_bucket_fails_with_one_line(repo, server):
    repo.point_at(server["port"], "s3://no-such-bucket/cache")
    for args in (("dvc", "push"), ("dvc", "status", "-c"), ("dvc", "pull")):
        if args[1] == "pull":  # with everything cached, pull would not need the remote
            shutil.rmtree(repo.root / ".dvc" / "cache")
            (repo.root / "notes.txt").unlink()
        t0 = time.monotonic()
        failed = repo.run(*args, check=False)
        print(f"\nmissing bucket: {' '.join(args)} failed after {time.monotonic() - t0:.1f}s")
        assert failed.returncode != 0
        errors = _error_lines(failed)
        assert len(errors) == 1, failed.stderr
        assert "NoSuchBucket" in errors[0] and "bucket does not exist" in errors[0], errors[0]
    assert "no-such-bucket" not in [b["Name"] for b in _client(server["port"]).list_buckets()["Buckets"]]

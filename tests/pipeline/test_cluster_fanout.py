"""Sharing experiments and the run cache through the S3 remote, against a real moto server.

Why: a sweep fanned out over cluster jobs (`dvc exp run --queue`, one job per node)
is only useful if its results reach the people reviewing it. Two mechanisms do
that: `dvc exp push/pull` (the experiment's git ref to a git remote, its outputs
to the DVC remote) and the run cache (`dvc push/pull --run-cache`: a stage's
outputs keyed by its deps and params, so any checkout asking for the same inputs
restores instead of recomputing). Each test builds a throwaway git+DVC repo with
a three-line python stage (seconds, not the real pipeline), runs the venv's `dvc`
with no user AWS/DVC/git config, and checks a *fresh clone* from a bare git remote.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from decision_pipeline.common import local_s3

DVC = str(Path(sys.executable).parent / "dvc")
BUCKET = local_s3.DEFAULT_BUCKET
STAGE_SCRIPT = """import json, pathlib, yaml
x = yaml.safe_load(open("params.yaml"))["train"]["x"]
pathlib.Path("ran.log").open("a").write(f"ran x={x}\\n")  # not an output: says whether the command ran here
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/result.json").write_text(json.dumps({"x": x, "square": x * x}))
pathlib.Path("metrics.json").write_text(json.dumps({"square": x * x}))
"""
DVC_YAML = """stages:
  square:
    cmd: python square.py
    deps: [square.py]
    params: [train.x]
    outs: [out]
    metrics: [{METRICS}]
"""
CACHED, IN_GIT = "metrics.json", "metrics.json: {cache: false}"  # the pipeline's own metrics are IN_GIT

pytestmark = pytest.mark.slow


class Checkout:
    """A git+DVC working copy in tmp_path, commands run with no user-level AWS, proxy, git or DVC config."""

    def __init__(self, root: Path, home: Path):
        self.root, self.home = root, home

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [DVC, *args[1:]] if args[0] == "dvc" else list(args)
        drop = ("AWS_", "DVC_", "GIT_", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        env.update({**local_s3.LOCAL_CREDENTIALS, "HOME": str(self.home), "PATH": f"{Path(sys.executable).parent}"
                    f"{os.pathsep}{os.environ['PATH']}", "DVC_GLOBAL_CONFIG_DIR": str(self.home / "dvc-global"),
                    "DVC_SYSTEM_CONFIG_DIR": str(self.home / "dvc-system"),
                    "DVC_SITE_CACHE_DIR": str(self.home / "dvc-site"), "DVC_NO_ANALYTICS": "1",
                    "AWS_CONFIG_FILE": str(self.home / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(self.home / "none"),
                    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                    "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1"})
        proc = subprocess.run(cmd, cwd=self.root, env=env, capture_output=True, text=True, timeout=180)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def clone(self, dest: Path) -> "Checkout":
        """`git clone` of this checkout's bare remote: what a reviewer or another cluster node starts from."""
        Checkout(dest.parent, self.home).run("git", "clone", "-q", str(self.root.parent / "remote.git"), dest.name)
        return Checkout(dest, self.home)


@pytest.fixture
def server():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    srv, port = local_s3.start(0)
    yield port
    srv.stop()


@pytest.fixture
def origin(tmp_path, server, request) -> Checkout:
    return make_origin(tmp_path, server, request.node.name, CACHED)


def make_origin(tmp_path: Path, server: int, name: str, metrics: str) -> Checkout:
    """A committed repo with the `square` stage, its DVC remote on the moto server, a bare git remote."""
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "origin"
    root.mkdir()
    repo = Checkout(root, home)
    repo.run("git", "init", "-q", "-b", "main")
    repo.run("dvc", "init", "-q")
    (root / "square.py").write_text(STAGE_SCRIPT)
    (root / "params.yaml").write_text("train:\n  x: 2\n")
    (root / "dvc.yaml").write_text(DVC_YAML.replace("{METRICS}", metrics))
    (root / ".gitignore").write_text("ran.log\n")
    repo.run("dvc", "remote", "add", "-d", "storage", f"s3://{BUCKET}/{name}")
    repo.run("dvc", "remote", "modify", "storage", "endpointurl", f"http://127.0.0.1:{server}")
    repo.run("git", "add", "-A")
    repo.run("git", "commit", "-qm", "square stage")
    repo.run("git", "init", "-q", "--bare", "-b", "main", str(tmp_path / "remote.git"))
    repo.run("git", "remote", "add", "origin", str(tmp_path / "remote.git"))
    repo.run("git", "push", "-q", "origin", "main")
    return repo


def _objects(port: int, prefix: str) -> list[str]:
    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                      aws_access_key_id="local", aws_secret_access_key="local")
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]


def test_exp_push_then_pull_into_a_fresh_clone(origin, server, tmp_path, request):
    origin.run("dvc", "exp", "run", "-q", "-n", "x-is-7", "-S", "train.x=7")
    result = (origin.root / "out" / "result.json").read_text()
    assert json.loads(result) == {"x": 7, "square": 49}
    pushed = origin.run("dvc", "exp", "push", "origin", "x-is-7")
    assert "x-is-7" in pushed.stdout + pushed.stderr
    assert any("/files/md5/" in k for k in _objects(server, request.node.name + "/"))  # the outputs went to S3

    clone = origin.clone(tmp_path / "reviewer")
    assert not (clone.root / "out").exists()
    listed = clone.run("dvc", "exp", "list", "origin").stdout
    assert "x-is-7" in listed
    clone.run("dvc", "exp", "pull", "origin", "x-is-7")
    shown = json.loads(clone.run("dvc", "exp", "show", "--json").stdout)
    exps = [e for row in shown for e in (row.get("experiments") or []) if e.get("name") == "x-is-7"]
    assert exps, shown
    metrics = exps[0]["revs"][0]["data"]["metrics"]["metrics.json"]["data"]
    assert metrics == {"square": 49}
    clone.run("dvc", "exp", "apply", "x-is-7")  # checks the outputs out of the pulled cache
    assert (clone.root / "out" / "result.json").read_text() == result
    assert not (clone.root / "ran.log").exists()  # the reviewer's checkout never ran the stage
    assert json.loads(clone.run("dvc", "status", "--json").stdout or "{}") == {}


def _share_a_sweep_run(origin: Checkout, port: int, name: str) -> Checkout:
    """main (x=2) committed and pushed; x=5 run elsewhere, only its run cache pushed; a fresh clone asks for x=5."""
    origin.run("dvc", "repro", "-q")
    origin.run("git", "add", "dvc.lock", ".gitignore", *(["metrics.json"] if "cache: false" in
                                                           (origin.root / "dvc.yaml").read_text() else []))
    origin.run("git", "commit", "-qm", "x=2 results")
    origin.run("git", "push", "-q", "origin", "main")
    origin.run("dvc", "push")  # main's outputs
    (origin.root / "params.yaml").write_text("train:\n  x: 5\n")  # a sweep job: nothing of it is committed
    origin.run("dvc", "repro", "-q")
    assert (origin.root / "ran.log").read_text() == "ran x=2\nran x=5\n"
    origin.run("dvc", "push", "--run-cache")
    assert any(k.startswith(f"{name}/runs/") for k in _objects(port, name + "/"))
    clone = origin.clone(origin.root.parent / "reviewer")
    assert "x: 2" in (clone.root / "params.yaml").read_text()
    clone.run("dvc", "pull", "--run-cache")  # main's outputs and every recorded run of the stage
    assert json.loads((clone.root / "out" / "result.json").read_text()) == {"x": 2, "square": 4}
    (clone.root / "params.yaml").write_text("train:\n  x: 5\n")
    return clone


def test_run_cache_push_then_pull_restores_a_stage_without_running_it(origin, server, request):
    clone = _share_a_sweep_run(origin, server, request.node.name)
    # `dvc pull --run-cache` fetched the run records, not the other runs' outputs: plain repro would run
    assert "Running stage 'square'" in clone.run("dvc", "repro", "--dry").stdout
    repro = clone.run("dvc", "repro", "--pull")  # --pull fetches the outputs the run cache names
    said = repro.stdout + repro.stderr
    assert "Stage 'square' is cached - skipping run, checking out outputs" in said, said
    assert not (clone.root / "ran.log").exists()  # the command did not run in the clone
    assert json.loads((clone.root / "out" / "result.json").read_text()) == {"x": 5, "square": 25}
    assert json.loads((clone.root / "metrics.json").read_text()) == {"square": 25}
    (clone.root / "params.yaml").write_text("train:\n  x: 6\n")  # inputs nobody ran: the command runs
    assert "Running stage 'square'" in clone.run("dvc", "repro").stdout
    assert (clone.root / "ran.log").read_text() == "ran x=6\n"


def test_a_cache_false_metric_keeps_a_stage_out_of_the_remote_run_cache(tmp_path, server, request):
    """DVC 3.67.1: the run cache records a `cache: false` output locally but `dvc push --run-cache` does not
    upload it, so another machine reruns the stage. Every stage of this pipeline keeps its metrics in git
    (`cache: false`): sharing the run cache saves them no compute (see docs/scaling.md)."""
    origin = make_origin(tmp_path, server, request.node.name, IN_GIT)
    clone = _share_a_sweep_run(origin, server, request.node.name)
    repro = clone.run("dvc", "repro", "--pull")
    said = repro.stdout + repro.stderr
    assert "Running stage 'square'" in said and "is cached - skipping run" not in said, said
    assert "Missing cache files" in said and "name: metrics.json" in said
    assert (clone.root / "ran.log").read_text() == "ran x=5\n"


SBATCH = Path(__file__).resolve().parents[2] / "configs" / "slurm" / "stage.sbatch"


def test_slurm_stage_template_runs_a_stage_and_pushes_it(origin, server, request):
    """The template is plain bash (#SBATCH lines are comments): run it as a batch job would, no SLURM needed."""
    root = origin.root
    (root / "params.yaml").write_text("train:\n  x: 3\nsquare:\n  workers: 1\n")  # a sharded-stage-like section
    venv = Path(sys.executable).parent.parent
    job = origin.run("env", "STAGE=square", f"REPO_DIR={root}", f"VENV={venv}", "GPUS=4", "SLURM_JOB_ID=42",
                     "bash", str(SBATCH))
    assert "warning: square.workers is 1 but the node has 4 GPU(s)" in job.stderr
    assert "[slurm] job 42" in job.stdout and "Running stage 'square'" in job.stdout
    assert json.loads((root / "out" / "result.json").read_text()) == {"x": 3, "square": 9}
    assert json.loads(origin.run("dvc", "status", "-c", "--json").stdout or "{}") == {}  # pushed
    assert any("/files/md5/" in k for k in _objects(server, request.node.name + "/"))

    missing = origin.run("env", "-u", "STAGE", "bash", str(SBATCH), check=False)
    assert missing.returncode != 0 and "set STAGE" in missing.stderr
    novenv = origin.run("env", "STAGE=square", f"VENV={root / 'nowhere'}", "bash", str(SBATCH), check=False)
    assert novenv.returncode == 2 and "no virtual environment at" in novenv.stderr

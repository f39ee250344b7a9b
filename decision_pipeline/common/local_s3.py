"""A local S3-compatible server (moto) so `dvc push` / `dvc pull` work without a cloud account.

The project's default DVC remote `storage` is `s3://decision-pipeline/cache` at
http://127.0.0.1:9000. Run `make s3-local` (this module) in one terminal and
`dvc push` in another; point `storage` at real S3 / MinIO with
`dvc remote modify --local storage ...`. Objects live in the server's memory
and are gone when it stops: it is for trying the workflow and for tests.
"""
from __future__ import annotations

import argparse
import logging
import os
import socket
import time

import boto3
from moto.server import ThreadedMotoServer

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.log import stage_main

DEFAULT_BUCKET = "decision-pipeline"
# moto accepts any credentials; DVC (botocore) refuses to sign without some
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
                     "AWS_DEFAULT_REGION": "us-east-1"}


def _check_port_free(host: str, port: int) -> None:
    """moto waits forever for a server that could not bind, so a busy port must fail here."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server itself binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise PipelineError(f"local S3: {host}:{port} is in use ({exc.strerror}); "
                                f"stop what holds it or pass --port") from None


def start(port: int = 0, bucket: str = DEFAULT_BUCKET, host: str = "127.0.0.1") -> tuple[ThreadedMotoServer, int]:
    """Start the server with `bucket` created; port 0 takes a free one. Returns (server, port); stop with `.stop()`."""
    if port:
        _check_port_free(host, port)
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    client = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")
    client.create_bucket(Bucket=bucket)
    return server, port


@stage_main
def main(argv: list[str] | None = None) -> None:
    os.environ.update({k: os.environ.get(k, v) for k, v in LOCAL_CREDENTIALS.items()})  # for what it starts
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, default=9000)
    ap.add_argument("--bucket", default=DEFAULT_BUCKET)
    args = ap.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server, _ = start(args.port, args.bucket)
    exports = " ".join(f"{k}={v}" for k, v in LOCAL_CREDENTIALS.items())
    print(f"S3-compatible server on http://127.0.0.1:{args.port}, bucket '{args.bucket}' (in memory).\n"
          f"In another shell: export {exports}; dvc push   (Ctrl-C here stops the server)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


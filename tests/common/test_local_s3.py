"""The local S3-compatible server behind `make s3-local` and the remote round-trip test."""
from __future__ import annotations

import socket

import boto3
import pytest

from decision_pipeline.common import local_s3
from decision_pipeline.common.errors import PipelineError


def test_busy_port_is_a_clear_error_not_a_hang():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PipelineError, match=f"127.0.0.1:{port} is in use"):
            local_s3.start(port)


def test_free_port_server_has_the_bucket(monkeypatch):
    for var in ("AWS_PROFILE", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    server, port = local_s3.start(0, bucket="unit-test-bucket")  # moto's store is per process: own bucket
    try:
        assert port > 0
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                              aws_access_key_id="local", aws_secret_access_key="local")
        client.put_object(Bucket="unit-test-bucket", Key="k", Body=b"v")
        assert client.get_object(Bucket="unit-test-bucket", Key="k")["Body"].read() == b"v"
        client.delete_object(Bucket="unit-test-bucket", Key="k")
    finally:
        server.stop()

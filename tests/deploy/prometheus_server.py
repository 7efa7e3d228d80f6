"""A real Prometheus server for tests: started on a loopback port, queried through its HTTP API.

The configuration is the shipped deploy/prometheus/prometheus.yml with the parts that only make sense
inside compose replaced: the worker job scrapes given loopback targets instead of compose's DNS name,
everything is scraped and evaluated every second, and the rule files are loaded by absolute path.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.deploy_files import PROMETHEUS_CONFIG, WORKER_JOB


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def loopback_config(worker_targets: list[str], own_address: str) -> dict[str, Any]:
    """The shipped configuration, pointed at loopback targets, with 1 s scrape and rule intervals."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(PROMETHEUS_CONFIG.parent / pattern) for pattern in config["rule_files"]]
    for job in config["scrape_configs"]:
        targets = worker_targets if job["job_name"] == WORKER_JOB else [own_address]
        job.pop("dns_sd_configs", None)
        job["static_configs"] = [{"targets": targets}]
    return config


class PrometheusError(RuntimeError):
    """Prometheus answered a query with an error (for instance, the expression does not parse)."""


@dataclass
class PrometheusServer:
    """A running ``prometheus`` process and the URL of its HTTP API.

    Usage (needs the ``prometheus`` binary, hence not a doctest)::

        server = PrometheusServer.start("prometheus", ["127.0.0.1:8000"], tmp_path)
        server.wait_ready()
        server.query('up{job="sgt-worker"}')[0]["value"][1]  # '1' once the target was scraped
        server.stop()
    """

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    @classmethod
    def start(cls, binary: str, worker_targets: list[str], directory: Path) -> PrometheusServer:
        """Start Prometheus with the shipped configuration pointed at ``worker_targets``."""
        port = free_port()
        config_path = directory / "prometheus.yml"
        config = loopback_config(worker_targets, f"127.0.0.1:{port}")
        config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
        log_path = directory / "prometheus.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config_path}",
                    f"--storage.tsdb.path={directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return cls(process, f"http://127.0.0.1:{port}", log_path)

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready after {timeout} s: {self.log_tail()}")

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of an API answer; raises PrometheusError with Prometheus's message on an error."""
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as error:
            body = json.loads(error.read() or b"{}")
        if body.get("status") != "success":
            raise PrometheusError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result of an instant query at the current time."""
        data = self.api("query", query=expr)
        return data["result"] if isinstance(data["result"], list) else [data["result"]]

    def query_range(self, expr: str, seconds: float, step: str) -> list[dict[str, Any]]:
        """The series of a range query over the last ``seconds``, as a Grafana time series panel asks."""
        end = time.time()
        data = self.api("query_range", query=expr, start=f"{end - seconds:.3f}", end=f"{end:.3f}", step=step)
        return data["result"]

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

"""logwatch and an Alertmanager that serves HTTPS only (its web config's tls_server_config)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from tests.cluster.clusterkit import NAN, START, am_config, append
from tests.cluster.conftest import Cluster
from tests.cluster.engines import wait_for


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (apt-get install openssl)")
    cert, key = folder / "cert.pem", folder / "key.pem"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subject = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        [*request, "-keyout", str(key), "-out", str(cert), *subject],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_peer_with_its_ca_file_gets_the_alert_and_without_it_is_told_the_fix(
    cluster: Cluster, tmp_path: Path
) -> None:
    """With `ca_file` naming the CA, doctor's post is accepted and tail's NaN alert reaches the
    HTTPS-only Alertmanager; without it, doctor says the TLS check failed and names ca_file."""
    cert, key = self_signed(tmp_path)
    am = cluster.alertmanager("am", cluster.webhook(), tls=(cert, key)).start()
    assert am.url.startswith("https://")
    trusted = tmp_path / "trusted.toml"
    trusted.write_text(am_config(am.url, extra=f'ca_file = "{cert}"\n') + '[gpu]\nmode = "off"\n')
    bare = tmp_path / "bare.toml"
    bare.write_text(am_config(am.url) + '[gpu]\nmode = "off"\n')

    ok = CliRunner().invoke(cli, ["doctor", "--config", str(trusted)])
    assert f"ok   alertmanager {am.url}: POST /api/v2/alerts accepted" in ok.output.splitlines()
    refused = CliRunner().invoke(cli, ["doctor", "--config", str(bare)])
    [line] = [x for x in refused.output.splitlines() if x.startswith(f"FAIL alertmanager {am.url}")]
    assert "TLS failed" in line and "ca_file" in line

    node = cluster.node("n1", am_config(am.url, extra=f'ca_file = "{cert}"\n'), log=START)
    node.wait_following()
    append(node.folder / "train.log", NAN)
    [alert] = wait_for(am.alerts, 30, "the alert in the HTTPS Alertmanager")
    assert alert["labels"]["alertname"] == "nan-loss"
    assert node.stop() == 0

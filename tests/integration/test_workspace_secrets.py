"""A private package index with a user name and password in ``--index-url``, on the real Docker Engine, a real
registry and a real (authenticating) index served here: pip installs through it, and the pushed image, read back
from the registry's HTTP API (manifest, config with its history and labels, every layer decompressed), holds
neither the password nor the user name; no printed line holds the password.

The index is a PEP 503 "simple" index served by this test on the Docker bridge's gateway address (the build
container reaches the host there) that answers 401 without the right basic-auth credentials.
"""

from __future__ import annotations

import base64
import gzip
import http.server
import ipaddress
import json
import re
import ssl
import subprocess
import threading
import uuid

import docker
import pytest

from itest_helpers import ddpctl, make_wheel, own_requirements, remove_workspace_images

pytestmark = [pytest.mark.docker]

USER, PASSWORD = "idxuser-7f3a", "S3cretPw-9c1e"
BASE = "ddpctl/base:bookworm"


@pytest.fixture
def private_index(engine, tmp_path):
    house = tmp_path / "served"
    wheel = make_wheel(house, "wsprobe", "1.0", "VALUE = 42\n")
    want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):  # noqa: N802
            seen.append((self.path, self.headers.get("Authorization") == want))
            if self.headers.get("Authorization") != want:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="index"')
                self.end_headers()
                return
            if self.path.rstrip("/") == "/simple/wsprobe":
                body = f'<a href="/files/{wheel.name}">{wheel.name}</a>'.encode()
            elif self.path == f"/files/{wheel.name}":
                body = wheel.read_bytes()
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if self.path.startswith("/simple") else "application/zip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    ipam = engine.networks.get("bridge").attrs["IPAM"]["Config"][0]  # the default bridge's gateway: its first host
    gateway = ipam.get("Gateway") or str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
    # HTTPS with a certificate made here (pip ignores a plain-HTTP index that is not on localhost): the CA
    # reaches the build through --ca-file
    cert, key = tmp_path / "idx.pem", tmp_path / "idx.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=index",
                    "-addext", f"subjectAltName=IP:{gateway}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    server = http.server.ThreadingHTTPServer((gateway, 0), Handler)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://{USER}:{PASSWORD}@{gateway}:{server.server_address[1]}/simple", cert, seen
    server.shutdown()
    server.server_close()


def _layer_text(blob: bytes) -> bytes:
    return gzip.decompress(blob) if blob[:2] == b"\x1f\x8b" else blob


def test_index_credentials_reach_no_layer_history_label_or_line(engine, registry, private_index, tmp_path):
    index_url, ca, seen = private_index
    root = tmp_path / "proj"
    root.mkdir()
    (root / "train.py").write_text("import wsprobe\nprint('probe', wsprobe.VALUE)\n")
    # its own text: the layer is keyed by base + text, so a layer cached by another run would skip the index
    (root / "requirements.txt").write_text(own_requirements("wsprobe==1.0"))
    repo = f"ws-test/{uuid.uuid4().hex[:8]}"
    target = f"{registry.address}/{repo}"
    out = None
    try:
        out = ddpctl("image", "build", "--workdir", str(root), "--base", BASE, "--index-url", index_url,
                     "--ca-file", str(ca), "--tag", target, "--push")
        assert out.returncode == 0, out.stderr
        assert any(ok for path, ok in seen if path.startswith("/files/")), seen  # pip used the credentials
        pinned = out.stdout.strip()
        printed = out.stdout + out.stderr
        assert PASSWORD not in printed  # (pip's own lines show the user name, as pip does everywhere)
        assert "index https://****@" in out.stderr  # which index the build used, credentials hidden
        manifest, config, layers = registry.image_blobs(repo, pinned.split("@", 1)[1])
        text = json.dumps(config)
        for secret in (PASSWORD, USER, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()):
            assert secret not in text, "credential in the pushed image's config or history"
            for blob in layers:
                assert secret.encode() not in _layer_text(blob), "credential in a pushed layer"
        history = [h.get("created_by", "") for h in config["history"]]
        assert not any("INDEX_URL" in h or "index-url" in h for h in history), history
        assert not any(b"ddpctl-ws/" in _layer_text(blob) for blob in layers)  # nothing staged stays
        # and the image runs the code with the requirement installed
        engine.images.remove(f"{target}:{registry.tags(repo)[0]}")
        engine.images.pull(pinned)
        assert engine.containers.run(pinned, ["python3", "train.py"], remove=True).decode().split() == ["probe", "42"]
        engine.images.remove(pinned)
    finally:
        remove_workspace_images(engine, repo)
        # the images of repo are gone by now (removed above), so their requirements layer is found by its name
        for deps in re.findall(r"ddpctl/workspace-deps:[0-9a-f]+", out.stderr if out is not None else ""):
            try:
                engine.images.remove(deps)
            except docker.errors.APIError:
                pass

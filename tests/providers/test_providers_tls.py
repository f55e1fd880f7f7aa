"""The provider's own transport (providers/transport.py) over TLS, as every hosted
provider is reached: a whole recorded reply streams from an HTTPS server whose
certificate the trusted CA file ($SSL_CERT_FILE) holds, and a server it does not
hold is refused in one line naming the failed verification.

The server is the network edge itself: a TCP listener on 127.0.0.1 that shakes
hands with a certificate made here, reads the request and writes the recorded
OpenAI stream."""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from helpers import FIXTURES, openai_provider, read_request
from nodecode.errors import ProviderError

BODY = {"model": "m", "messages": [{"role": "user", "content": "weather in San Francisco?"}]}


def certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"nodecode test {name}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / f"{name}.pem", folder / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


class TLSEdge:
    """Accepts TLS connections with ``cert``; each request gets ``reply`` (a
    recorded SSE stream) and its body is kept in ``bodies``."""

    def __init__(self, cert: tuple[Path, Path], reply: bytes) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(*cert)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.reply, self.bodies = reply, []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.listener.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed: the test is over
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            with self.context.wrap_socket(conn, server_side=True) as tls:
                body = read_request(tls).partition(b"\r\n\r\n")[2]
                self.bodies.append(json.loads(body))
                tls.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"content-length: %d\r\nconnection: close\r\n\r\n"
                    % len(self.reply)
                    + self.reply
                )
        except (OSError, ssl.SSLError):
            pass  # a client that refused the certificate: it said so itself


@pytest.fixture
def certs(tmp_path: Path) -> Iterator[dict[str, tuple[Path, Path]]]:
    yield {name: certificate(tmp_path, name) for name in ("trusted", "stranger")}


def test_a_reply_streams_whole_over_tls_from_a_server_the_ca_file_trusts(certs, monkeypatch):
    recorded = (FIXTURES / "openai_text_stream.sse").read_bytes()
    edge = TLSEdge(certs["trusted"], recorded)
    monkeypatch.setenv("SSL_CERT_FILE", str(certs["trusted"][0]))
    provider = openai_provider(edge.url, "sk-test", max_retries=0)
    try:
        reply = provider.stream(BODY)
    finally:
        provider.close()
        edge.listener.close()

    assert reply.text.startswith("I'm unable to provide real-time weather updates. To get")
    assert not reply.stopped
    assert edge.bodies[0]["messages"] == BODY["messages"]  # the server read our JSON over TLS


def test_a_server_the_ca_file_does_not_hold_is_refused_in_one_line(certs, monkeypatch):
    edge = TLSEdge(certs["stranger"], b"")
    monkeypatch.setenv("SSL_CERT_FILE", str(certs["trusted"][0]))
    provider = openai_provider(edge.url, "sk-test", max_retries=0)
    try:
        with pytest.raises(ProviderError) as refused:
            provider.stream(BODY)
    finally:
        provider.close()
        edge.listener.close()

    said = str(refused.value)
    assert "\n" not in said and "CERTIFICATE_VERIFY_FAILED" in said, said
    assert edge.bodies == []  # nothing was sent to it

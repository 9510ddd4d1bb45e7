"""TLS: a throw-away CA and a certificate for localhost / 127.0.0.1 (made
with `cryptography`), and one `champollion serve` process running the
surface family and a gateway, both over TLS, the gateway with --auth and
reaching the family over TLS (its config's tls_ca), health checks also in
plaintext on --health-port.

What is checked: the CLI evaluates examples/eng-spa through it with
--tls-ca and a token, and gets the surface scores the session's plaintext
stack gives; a client that does not trust the CA (--tls, another CA), or
speaks plaintext to it, gets one line naming the gateway, exit 1; a wrong
certificate, key or CA file stops `serve` with one line, exit 2."""
from __future__ import annotations

import datetime
import ipaddress
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from apps.client.channel import open_channel
from champollion.eval.v1 import family_pb2, gateway_pb2_grpc
from gateway.server.tokens import new_token, token_line
from tests.conftest import EXAMPLE, REPO

TOKEN = new_token()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, issuer: x509.Name, public_key, signing_key, extensions) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(hours=1)))
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signing_key, hashes.SHA256())


def make_certificates(folder: Path) -> dict[str, Path]:
    """ca.pem (a self-signed CA), and server.pem / server.key: a certificate
    it signed for localhost and 127.0.0.1, with its key."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("champollion test CA", _name("champollion test CA"), ca_key.public_key(), ca_key,
                      [(x509.BasicConstraints(ca=True, path_length=None), True)])
    server = _certificate("localhost", ca.subject, key.public_key(), ca_key, [
        (x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
         False),
        (x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False),
    ])
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"ca": folder / "ca.pem", "cert": folder / "server.pem", "key": folder / "server.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return paths


def free_ports(count: int) -> int:
    """The first of `count` consecutive ports free on loopback now."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        sockets = []
        try:
            for port in range(first, first + count):
                sockets.append(socket.socket())
                sockets[-1].bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for opened in sockets:
                opened.close()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, Path]:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> Path:
    return make_certificates(tmp_path_factory.mktemp("other-tls"))["ca"]


@pytest.fixture(scope="module")
def tls_gateway(certificates, tmp_path_factory) -> str:
    """`serve --family surface --family gateway` over TLS; the gateway's address."""
    folder = tmp_path_factory.mktemp("tls-serve")
    port = free_ports(4)
    health_port = port + 2
    tokens = folder / "tokens.yaml"
    tokens.write_text(f"tokens:\n  {token_line('tls-test', 'submitter', TOKEN)}\n", encoding="utf-8")
    config = folder / "gateway.yaml"
    config.write_text(json.dumps({"families": {"surface": f"localhost:{port}"}, "tls_ca": str(certificates["ca"])}),
                      encoding="utf-8")
    log = (folder / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "apps.cli", "serve", "--family", "surface", "--family", "gateway",
         "--port", str(port), "--health-port", str(health_port), "--config", config, "--auth", tokens,
         "--no-store", "--tls-cert", certificates["cert"], "--tls-key", certificates["key"]],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "GRPC_VERBOSITY": "NONE"},
    )
    try:
        # Both servers answer health checks in plaintext on the health ports
        # (what a Kubernetes probe sees); waiting on them, no sleeping.
        for offset in (0, 1):
            with grpc.insecure_channel(f"127.0.0.1:{health_port + offset}") as channel:
                answer = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), wait_for_ready=True, timeout=60)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
        yield f"localhost:{port + 1}"
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


def test_the_cli_evaluates_over_tls_with_a_token(cli, tls_gateway, certificates, stack, tmp_path,
                                                run_card_validator):
    out = tmp_path / "card.json"
    result = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta", EXAMPLE / "meta.json",
                 "--gateway", tls_gateway, "--tls-ca", certificates["ca"], "--token", TOKEN, "--out", out)
    assert result.exit_code == 0, result.stderr
    card = json.loads(out.read_text(encoding="utf-8"))
    run_card_validator.validate(card)
    # The family answered over TLS: the same surface scores as the session's plaintext stack.
    reference = cli("evaluate", EXAMPLE / "corpus.json", EXAMPLE / "predictions.jsonl", "--meta",
                    EXAMPLE / "meta.json", "--gateway", stack.gateway_address, "--json")
    expected = json.loads(reference.stdout)["scores"]
    for metric in ("chrf_plus_plus", "bleu", "exact_match_rate", "ter"):
        assert card["scores"][metric] == expected[metric] is not None, metric
    assert not any("surface" in warning for warning in card["warnings"])


def test_the_python_client_needs_the_token_over_tls_too(tls_gateway, certificates):
    with open_channel(tls_gateway, tls_ca=certificates["ca"]) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            gateway_pb2_grpc.GatewayStub(channel).Describe(family_pb2.DescribeRequest(), timeout=30)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with open_channel(tls_gateway, token=TOKEN, tls_ca=certificates["ca"]) as channel:
        description = gateway_pb2_grpc.GatewayStub(channel).Describe(family_pb2.DescribeRequest(), timeout=30)
    (surface,) = [family for family in description.families if family.family == "surface"]
    assert surface.reachable, surface.error  # the gateway reaches the family over TLS


@pytest.mark.parametrize("trust", ["--tls", "other CA"])
def test_a_client_that_does_not_trust_the_ca_gets_one_line(cli, tls_gateway, other_ca, trust):
    options = ["--tls"] if trust == "--tls" else ["--tls-ca", other_ca]
    result = cli("describe", "--gateway", tls_gateway, "--token", TOKEN, *options)
    assert result.exit_code == 1
    assert result.stderr == (f"champollion: error: gateway at {tls_gateway}: its TLS certificate is not trusted "
                             f"(give --tls-ca with the CA certificate that signed it)\n")


def test_the_untrusted_certificate_line_is_all_a_user_sees(tls_gateway):
    """As a separate process: gRPC's own error lines (written by its C core
    straight to stderr) would come before ours."""
    environment = {key: value for key, value in os.environ.items() if key != "GRPC_VERBOSITY"}
    result = subprocess.run([sys.executable, "-m", "apps.cli", "describe", "--gateway", tls_gateway, "--tls",
                             "--token", TOKEN], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr == (f"champollion: error: gateway at {tls_gateway}: its TLS certificate is not trusted "
                             f"(give --tls-ca with the CA certificate that signed it)\n")


def test_plaintext_to_a_tls_gateway_says_to_use_tls(cli, tls_gateway):
    result = cli("runs", "--gateway", tls_gateway, "--token", TOKEN)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"champollion: error: gateway at {tls_gateway}: UNAVAILABLE: ")
    assert result.stderr.endswith("(if the gateway serves TLS, give --tls-ca or --tls)\n")


def test_an_unreadable_ca_file_is_a_bad_argument(cli, tls_gateway, tmp_path):
    result = cli("runs", "--gateway", tls_gateway, "--tls-ca", tmp_path / "missing.pem")
    assert result.exit_code == 2
    assert result.stderr == f"champollion: error: --tls-ca: cannot read {tmp_path / 'missing.pem'}: " \
                            f"No such file or directory\n"


def test_bad_certificates_stop_serve_with_one_line(cli, certificates, other_ca, tmp_path):
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate\n", encoding="utf-8")
    other_key = other_ca.parent / "server.key"
    cases = [
        (["--tls-cert", certificates["cert"]], "--tls-cert and --tls-key go together"),
        (["--tls-cert", tmp_path / "none.pem", "--tls-key", certificates["key"]],
         f"--tls-cert/--tls-key: cannot read {tmp_path / 'none.pem'}: No such file or directory"),
        (["--tls-cert", not_pem, "--tls-key", certificates["key"]],
         f"--tls-cert/--tls-key: {not_pem}, {certificates['key']}: not a PEM certificate and its private key"),
        (["--tls-cert", certificates["cert"], "--tls-key", other_key],
         f"--tls-cert/--tls-key: {certificates['cert']}, {other_key}: not a PEM certificate and its private key"),
    ]
    for options, message in cases:
        result = cli("serve", "--family", "surface", "--port", "0", *options)
        assert result.exit_code == 2, options
        assert result.stderr.startswith(f"champollion: error: {message}"), result.stderr
        assert result.stderr.count("\n") == 1


def test_an_unreadable_tls_ca_in_the_gateway_config_stops_it(cli, tmp_path):
    config = tmp_path / "gateway.yaml"
    config.write_text(f"tls_ca: {tmp_path / 'missing-ca.pem'}\n", encoding="utf-8")
    result = cli("serve", "--family", "gateway", "--port", "0", "--config", config, "--no-store")
    assert result.exit_code == 2
    assert result.stderr == f"champollion: error: tls_ca: cannot read {tmp_path / 'missing-ca.pem'}: " \
                            f"No such file or directory\n"

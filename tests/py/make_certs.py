"""Writes a throwaway PKI for the mcpgate TLS tests into DIR, with the `cryptography` package of
the test venv: a CA (ca.pem), a server certificate for 127.0.0.1 and localhost signed by it
(server.pem, server-key.pem), a client certificate signed by it (client.pem, client-key.pem), and
a second, unrelated CA with its own server certificate (other-ca.pem, other-server.pem,
other-server-key.pem), to test that a renewed certificate is picked up.

Usage: make_certs.py DIR
"""

from __future__ import annotations

import datetime
import ipaddress
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def issue(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name, issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool, usage: list) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
    else:
        b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        if ExtendedKeyUsageOID.SERVER_AUTH in usage:
            sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def pki(out: Path, prefix: str) -> None:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = issue(f"mcpgate test CA {prefix or 'main'}", ca_key, name(f"mcpgate test CA {prefix or 'main'}"), ca_key, ca=True, usage=[])
    write_cert(out / f"{prefix}ca.pem", ca)
    server_key = ec.generate_private_key(ec.SECP256R1())
    write_key(out / f"{prefix}server-key.pem", server_key)
    write_cert(out / f"{prefix}server.pem", issue("127.0.0.1", server_key, ca.subject, ca_key, ca=False, usage=[ExtendedKeyUsageOID.SERVER_AUTH]))
    if not prefix:
        client_key = ec.generate_private_key(ec.SECP256R1())
        write_key(out / "client-key.pem", client_key)
        write_cert(out / "client.pem", issue("mcpgate-client", client_key, ca.subject, ca_key, ca=False, usage=[ExtendedKeyUsageOID.CLIENT_AUTH]))


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    pki(out, "")
    pki(out, "other-")


if __name__ == "__main__":
    main()

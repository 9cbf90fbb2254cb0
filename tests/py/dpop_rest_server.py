"""A REST API that takes only DPoP-bound tokens (RFC 9449) and is its own OAuth authorization
server, on the standard library and `cryptography`: what a hosted API with proof-of-possession
looks like to a gateway that reaches it as each caller.

- `GET /openapi.json`: the API's description (`GET /api/whoami`, operation `whoami`).
- Protected-resource metadata (RFC 9728) at `/.well-known/oauth-protected-resource[/api]`:
  resource `<base>/api`, `dpop_bound_access_tokens_required`.
- Authorization server metadata (RFC 8414), `/register` (RFC 7591), `/authorize` (approves at
  once as the user `login_hint` names, PKCE S256 required), `/token` (authorization code and
  refresh token; every request needs a valid DPoP proof with the server's own nonce, else 400
  `use_dpop_nonce` with a `DPoP-Nonce` header; the token is bound to the proof's key: `token_type`
  DPoP, and a refresh must come from the same key). Tokens live `--token-lifetime` seconds.
- `GET /api/whoami`: needs `Authorization: DPoP <token>` and a proof signed by the token's key for
  this method and URL, with the token's hash (`ath`) and the server's current nonce: a proof
  without it is answered 401 `WWW-Authenticate: DPoP error="use_dpop_nonce"` with a `DPoP-Nonce`
  header (RFC 9449 §9). Answers `{"subject", "jkt"}`.

Every event (register, token, token_nonce_asked, nonce_asked, served, refused) is appended to `--log` as one JSON
line. Prints `listening on <base>` once ready.

Usage: dpop_rest_server.py --port 0 --log events.jsonl
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def thumbprint(jwk: dict) -> str:
    """RFC 7638 thumbprint of an EC key."""
    canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode()).digest())


class ProofError(Exception):
    pass


def check_proof(proof: str | None, method: str, url: str) -> tuple[dict, str]:
    """A DPoP proof's claims and its key's thumbprint, once its form and ES256 signature hold."""
    if not proof:
        raise ProofError("no DPoP proof")
    try:
        head_b64, claims_b64, sig_b64 = proof.split(".")
        header = json.loads(unb64url(head_b64))
        claims = json.loads(unb64url(claims_b64))
        sig = unb64url(sig_b64)
    except ValueError as e:
        raise ProofError(f"malformed proof: {e}") from e
    if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256" or not isinstance(header.get("jwk"), dict):
        raise ProofError(f"unexpected proof header: {header}")
    jwk = header["jwk"]
    if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256" or "d" in jwk:
        raise ProofError("the proof's key is not a public P-256 key")
    numbers = ec.EllipticCurvePublicNumbers(
        int.from_bytes(unb64url(jwk["x"]), "big"), int.from_bytes(unb64url(jwk["y"]), "big"), ec.SECP256R1()
    )
    if len(sig) != 64:
        raise ProofError("an ES256 signature is 64 bytes")
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    try:
        numbers.public_key().verify(der, f"{head_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature as e:
        raise ProofError("bad signature") from e
    if claims.get("htm") != method or claims.get("htu") != url:
        raise ProofError(f"proof for {claims.get('htm')} {claims.get('htu')}, not {method} {url}")
    if abs(time.time() - float(claims.get("iat", 0))) > 60 or not claims.get("jti"):
        raise ProofError("stale proof or no jti")
    return claims, thumbprint(jwk)


class State:
    def __init__(self, log_path: str | None) -> None:
        self.lock = threading.Lock()
        self.log_path = log_path
        self.base = ""
        self.codes: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.seen_jti: set[str] = set()
        self.nonce = secrets.token_urlsafe(16)
        self.token_nonce = secrets.token_urlsafe(16)
        self.refresh: dict[str, dict] = {}
        self.lifetime = 3600

    def log(self, event: dict) -> None:
        if self.log_path:
            with self.lock, open(self.log_path, "a") as f:
                f.write(json.dumps(event) + "\n")


STATE = State(None)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
        pass

    def reply(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def form(self) -> dict[str, str]:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length).decode()
        return dict(urllib.parse.parse_qsl(raw))

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        base = STATE.base
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/openapi.json":
            self.reply(200, {
                "openapi": "3.0.3",
                "info": {"title": "Proof API", "version": "1"},
                "servers": [{"url": f"{base}/api"}],
                "paths": {"/whoami": {"get": {
                    "operationId": "whoami",
                    "summary": "Who the token was issued to",
                    "responses": {"200": {"description": "the token's subject",
                                          "content": {"application/json": {"schema": {"type": "object"}}}}},
                }}},
            })
        elif url.path in ("/.well-known/oauth-protected-resource/api", "/.well-known/oauth-protected-resource"):
            self.reply(200, {
                "resource": f"{base}/api",
                "authorization_servers": [base],
                "dpop_bound_access_tokens_required": True,
                "dpop_signing_alg_values_supported": ["ES256"],
            })
        elif url.path == "/.well-known/oauth-authorization-server":
            self.reply(200, {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "registration_endpoint": f"{base}/register",
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "dpop_signing_alg_values_supported": ["ES256"],
                "response_types_supported": ["code"],
            })
        elif url.path == "/authorize":
            q = dict(urllib.parse.parse_qsl(url.query))
            if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
                self.reply(400, {"error": "invalid_request", "error_description": "PKCE S256 required"})
                return
            code = secrets.token_urlsafe(16)
            with STATE.lock:
                STATE.codes[code] = {"challenge": q["code_challenge"], "subject": q.get("login_hint", "someone"),
                                     "redirect_uri": q.get("redirect_uri")}
            back = f"{q['redirect_uri']}?" + urllib.parse.urlencode({"code": code, "state": q.get("state", ""), "iss": base})
            self.send_response(302)
            self.send_header("location", back)
            self.send_header("content-length", "0")
            self.end_headers()
        elif url.path == "/api/whoami":
            self.whoami()
        else:
            self.reply(404, {"error": "not_found"})

    def whoami(self) -> None:
        auth = self.headers.get("authorization") or ""
        scheme, _, token = auth.partition(" ")
        with STATE.lock:
            bound = STATE.tokens.get(token)
        if scheme.lower() != "dpop" or bound is None:
            STATE.log({"event": "refused", "why": f"scheme {scheme!r} or unknown token"})
            self.reply(401, {"error": "invalid_token"}, {"www-authenticate": 'DPoP error="invalid_token", algs="ES256"'})
            return
        try:
            claims, jkt = check_proof(self.headers.get("dpop"), "GET", f"{STATE.base}/api/whoami")
        except ProofError as e:
            STATE.log({"event": "refused", "why": str(e)})
            self.reply(401, {"error": "invalid_dpop_proof"}, {"www-authenticate": 'DPoP error="invalid_dpop_proof", algs="ES256"'})
            return
        if claims.get("nonce") != STATE.nonce:
            STATE.log({"event": "nonce_asked", "sent": claims.get("nonce")})
            self.reply(401, {"error": "use_dpop_nonce"}, {
                "www-authenticate": 'DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"',
                "dpop-nonce": STATE.nonce,
            })
            return
        expected_ath = b64url(hashlib.sha256(token.encode()).digest())
        with STATE.lock:
            replayed = claims["jti"] in STATE.seen_jti
            STATE.seen_jti.add(claims["jti"])
        if jkt != bound["jkt"] or claims.get("ath") != expected_ath or replayed:
            STATE.log({"event": "refused", "why": "wrong key, ath or a replayed proof"})
            self.reply(401, {"error": "invalid_dpop_proof"}, {"www-authenticate": 'DPoP error="invalid_dpop_proof", algs="ES256"'})
            return
        STATE.log({"event": "served", "subject": bound["subject"], "jkt": jkt})
        self.reply(200, {"subject": bound["subject"], "jkt": jkt})

    def do_POST(self) -> None:  # noqa: N802
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/register":
            length = int(self.headers.get("content-length") or 0)
            meta = json.loads(self.rfile.read(length) or b"{}")
            out = dict(meta, client_id=f"client-{secrets.token_hex(4)}", client_secret=secrets.token_urlsafe(16))
            STATE.log({"event": "register", "client_id": out["client_id"]})
            self.reply(201, out)
        elif url.path == "/token":
            self.token()
        else:
            self.reply(404, {"error": "not_found"})

    def token(self) -> None:
        form = self.form()
        try:
            claims, jkt = check_proof(self.headers.get("dpop"), "POST", f"{STATE.base}/token")
        except ProofError as e:
            STATE.log({"event": "refused", "why": f"token: {e}"})
            self.reply(400, {"error": "invalid_dpop_proof", "error_description": str(e)})
            return
        if claims.get("nonce") != STATE.token_nonce:
            STATE.log({"event": "token_nonce_asked", "grant_type": form.get("grant_type")})
            self.reply(400, {"error": "use_dpop_nonce", "error_description": "Authorization server requires nonce in DPoP proof"},
                       {"dpop-nonce": STATE.token_nonce})
            return
        grant = form.get("grant_type")
        if grant == "authorization_code":
            with STATE.lock:
                code = STATE.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            if code is None or b64url(hashlib.sha256(verifier.encode()).digest()) != code["challenge"]:
                self.reply(400, {"error": "invalid_grant"})
                return
            subject = code["subject"]
        elif grant == "refresh_token":
            with STATE.lock:
                held = STATE.refresh.pop(form.get("refresh_token", ""), None)
            if held is None or held["jkt"] != jkt:
                self.reply(400, {"error": "invalid_grant", "error_description": "unknown refresh token or another key"})
                return
            subject = held["subject"]
        else:
            self.reply(400, {"error": "unsupported_grant_type"})
            return
        token, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        with STATE.lock:
            STATE.tokens[token] = {"subject": subject, "jkt": jkt}
            STATE.refresh[refresh] = {"subject": subject, "jkt": jkt}
        STATE.log({"event": "token", "grant_type": grant, "subject": subject, "jkt": jkt})
        self.reply(200, {"access_token": token, "token_type": "DPoP", "expires_in": STATE.lifetime, "refresh_token": refresh},
                   {"cache-control": "no-store"})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    ap.add_argument("--token-lifetime", type=int, default=3600)
    args = ap.parse_args()
    STATE.log_path = args.log
    STATE.lifetime = args.token_lifetime
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    STATE.base = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"listening on {STATE.base}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()

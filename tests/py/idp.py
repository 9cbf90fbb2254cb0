"""A small identity provider for mcpgate's identity tests, where a browser is not the point.

It plays the provider that issued the gateway's JWT callers their tokens and that a protected
upstream trusts:
- it signs caller JWTs (ES256, published at /jwks; `GET /mint?sub=alice&aud=...` hands one out, as
  a login would), and exchanges a caller's JWT for an access token to one resource (`POST /token`,
  `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`, client `gw-client`/`gw-secret` by
  HTTP Basic; RFC 8693);
- it runs the authorization-code flow with PKCE S256 for clients it registers (`POST /register`,
  RFC 7591) and approves at once as the user named by the `login_hint` query parameter (default
  `alice`): `GET /authorize` redirects straight back with `code`, `state` and `iss`; the code is
  exchanged, once, with the verifier, at `POST /token`;
- it takes a workload JWT it minted with the JWT-bearer grant (RFC 7523, SEP-1933; audience its
  own issuer), for any `client_id`, and issues an access token to the `resource` asked for;
- it answers introspection (RFC 7662) for the resource server's client `files-rs`/`rs-secret`
  (what tests/py/protected_server.py asks).
Every token request is appended to <log-file> as a JSON line (`grant_type`, `sub`, `resource`,
`audience`, `subject_token_type`, `client_id`; a JWT-bearer one on arrival, with the assertion's
`aud` as `assertion_aud`).

Usage: idp.py <port> <log-file>      (port 0 = ephemeral; prints `LISTENING <port>`)
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import sys
import time

import anyio
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from serving import bind_loopback, serve_asgi
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import Route

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
CLIENTS = {"gw-client": "gw-secret", "files-rs": "rs-secret"}


def b64(n: int) -> str:
    return base64.urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()


def basic_client(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("basic "):
        return None
    try:
        client, _, secret = base64.b64decode(header[6:]).decode().partition(":")
    except ValueError:
        return None
    return client if CLIENTS.get(client) == secret else None


def build(issuer: str, log_file: str, jwt_resource: str | None = None) -> Starlette:
    key = ec.generate_private_key(ec.SECP256R1())
    numbers = key.public_key().public_numbers()
    jwk = {"kty": "EC", "crv": "P-256", "x": b64(numbers.x), "y": b64(numbers.y), "kid": "k1", "alg": "ES256", "use": "sig"}
    issued: dict[str, dict] = {}
    registered: dict[str, dict] = {}
    codes: dict[str, dict] = {}

    def log(entry: dict) -> None:
        with open(log_file, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")

    def issue(sub: str, resource: str, client_id: str) -> JSONResponse:
        access = f"tok-{sub}-{secrets.token_urlsafe(16)}"
        issued[access] = {"sub": sub, "aud": [resource], "exp": int(time.time()) + 600, "client_id": client_id}
        return JSONResponse({"access_token": access, "issued_token_type": ACCESS_TOKEN, "token_type": "Bearer", "expires_in": 600, "scope": "files:read"})

    async def metadata(_: Request) -> JSONResponse:
        return JSONResponse({
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "introspection_endpoint": f"{issuer}/token/introspection",
            "jwks_uri": f"{issuer}/jwks",
            "registration_endpoint": f"{issuer}/register",
            "grant_types_supported": [EXCHANGE, "authorization_code", JWT_BEARER],
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
            "authorization_response_iss_parameter_supported": True,
            "scopes_supported": ["files:read"],
        })

    async def jwks(_: Request) -> JSONResponse:
        return JSONResponse({"keys": [jwk]})

    async def mint(request: Request) -> JSONResponse:
        now = int(time.time())
        claims = {"iss": issuer, "sub": request.query_params["sub"], "aud": request.query_params["aud"], "iat": now, "exp": now + 600}
        return JSONResponse({"token": jwt.encode(claims, key, algorithm="ES256", headers={"kid": "k1"})})

    async def register(request: Request) -> JSONResponse:
        body = await request.json()
        client_id = f"client-{secrets.token_hex(6)}"
        registered[client_id] = body
        return JSONResponse({"client_id": client_id, "token_endpoint_auth_method": "none", **body}, status_code=201)

    async def authorize(request: Request) -> RedirectResponse | JSONResponse:
        q = request.query_params
        client = registered.get(q.get("client_id", ""))
        if client is None or q.get("redirect_uri") not in client.get("redirect_uris", []):
            return JSONResponse({"error": "invalid_request", "error_description": "unknown client or redirect_uri"}, status_code=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge") or not q.get("resource"):
            return JSONResponse({"error": "invalid_request", "error_description": "PKCE S256 and resource are required"}, status_code=400)
        code = secrets.token_urlsafe(16)
        codes[code] = {"client_id": q["client_id"], "redirect_uri": q["redirect_uri"], "challenge": q["code_challenge"],
                       "resource": q["resource"], "sub": q.get("login_hint", "alice")}
        sep = "&" if "?" in q["redirect_uri"] else "?"
        state = q.get("state", "")
        return RedirectResponse(f"{q['redirect_uri']}{sep}code={code}&state={state}&iss={issuer}", status_code=302)

    async def token(request: Request) -> JSONResponse:
        form = await request.form()
        if form.get("grant_type") == JWT_BEARER:
            # Logged on arrival, before any check: what matters is who received the assertion.
            assertion = str(form.get("assertion", ""))
            try:
                aud = jwt.decode(assertion, options={"verify_signature": False}).get("aud")
            except jwt.PyJWTError:
                aud = None
            log({"grant_type": JWT_BEARER, "assertion_aud": aud, "resource": form.get("resource"), "client_id": form.get("client_id")})
            try:
                claims = jwt.decode(assertion, key.public_key(), algorithms=["ES256"], issuer=issuer, audience=issuer)
            except jwt.PyJWTError as exc:
                return JSONResponse({"error": "invalid_grant", "error_description": str(exc)}, status_code=400)
            return issue(claims["sub"], str(form.get("resource") or ""), str(form.get("client_id") or ""))
        if form.get("grant_type") == "authorization_code":
            grant = codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier", ""))
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if grant is None or grant["challenge"] != digest or grant["client_id"] != form.get("client_id") \
                    or grant["redirect_uri"] != form.get("redirect_uri") or grant["resource"] != form.get("resource"):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            log({"grant_type": "authorization_code", "sub": grant["sub"], "resource": grant["resource"], "client_id": grant["client_id"]})
            if jwt_resource and grant["resource"] == jwt_resource:
                now = int(time.time())
                claims = {"iss": issuer, "sub": grant["sub"], "aud": jwt_resource, "iat": now, "exp": now + 600, "client_id": grant["client_id"]}
                access = jwt.encode(claims, key, algorithm="ES256", headers={"kid": "k1", "typ": "at+jwt"})
                return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 600})
            return issue(grant["sub"], grant["resource"], grant["client_id"])
        if basic_client(request) != "gw-client":
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if form.get("grant_type") != EXCHANGE:
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        try:
            subject = jwt.decode(str(form.get("subject_token")), key.public_key(), algorithms=["ES256"], issuer=issuer, options={"verify_aud": False})
        except jwt.PyJWTError as exc:
            return JSONResponse({"error": "invalid_grant", "error_description": str(exc)}, status_code=400)
        resource = str(form.get("resource") or "")
        if not resource:
            return JSONResponse({"error": "invalid_target"}, status_code=400)
        log({"grant_type": EXCHANGE, "sub": subject["sub"], "resource": resource, "audience": form.get("audience"),
             "subject_token_type": form.get("subject_token_type"), "client_id": "gw-client",
             "subject_digest": hashlib.sha256(str(form.get("subject_token")).encode()).hexdigest()})
        return issue(subject["sub"], resource, "gw-client")

    async def introspect(request: Request) -> JSONResponse:
        if basic_client(request) != "files-rs":
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        form = await request.form()
        t = issued.get(str(form.get("token")))
        if t is None or t["exp"] < time.time():
            return JSONResponse({"active": False})
        return JSONResponse({"active": True, "scope": "files:read", "token_type": "Bearer", "iss": issuer, **t})

    return Starlette(routes=[
        Route("/.well-known/oauth-authorization-server", metadata),
        Route("/jwks", jwks),
        Route("/mint", mint),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Route("/token/introspection", introspect, methods=["POST"]),
    ])


def main() -> None:
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: idp.py <port> <log-file> [<jwt-resource>]")
    sock = bind_loopback(int(sys.argv[1]), "idp")
    issuer = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = build(issuer, sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
    anyio.run(lambda: serve_asgi(app, 0, "idp", sock=sock))


if __name__ == "__main__":
    main()

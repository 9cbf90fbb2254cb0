"""An MCP server that is its own OAuth authorization server, built entirely from the official Python
SDK's `mcp.server.auth` (mcp==2.3.0), the way the SDK's `examples/servers/simple-auth` builds one:
an in-memory `OAuthAuthorizationServerProvider` handed to `MCPServer(auth_server_provider=...,
auth=AuthSettings(...))`, so every OAuth endpoint is the SDK's own handler:

- `GET /.well-known/oauth-authorization-server` (RFC 8414; issuer `http://127.0.0.1:<port>`, no
  trailing slash), `GET /authorize`, `POST /token`, `POST /register` (RFC 7591, enabled with
  `ClientRegistrationOptions(enabled=True)`), `POST /revoke`: `create_auth_routes`;
- `GET /.well-known/oauth-protected-resource/mcp` (RFC 9728; resource `http://127.0.0.1:<port>/mcp`,
  scope `user`): `create_protected_resource_routes`;
- `/mcp` (streamable HTTP) behind `BearerAuthBackend` + `RequireAuthMiddleware`, with the SDK's
  `ProviderTokenVerifier` (the provider's `load_access_token`) and `validate_token_resource=True`:
  a token must have been issued for this very `/mcp` (RFC 8707 `resource` of the authorization).
  Without a token: 401 with `WWW-Authenticate: Bearer ..., resource_metadata="..."`.

The provider approves every authorization at once (no login page): `/authorize` redirects straight
back to the client's redirect URI with `code` and `state`. The user it approves as (the token's
subject) is the `login_hint` query parameter of that `/authorize` request when there is one (the
SDK's handler does not pass it on, so a small ASGI wrapper reads it), else `user-<n>`, one per
authorization. Codes are single use; tokens last an hour; refresh tokens rotate.

Clients: any registered dynamically at `/register`, and optionally one registered in advance with
`--client-id/--client-secret/--redirect-uri` (token endpoint authentication `--client-auth`, default `client_secret_basic`,
grant types authorization_code and refresh_token, scope `user`).

What the SDK's token endpoint demands (mcp/server/auth/middleware/client_auth.py, handlers/token.py):
- `client_id` in the form body, always, HTTP Basic or not: `ClientAuthenticator` reads the client
  from the body's `client_id` before it looks at any header (no `client_id` there: 401
  `invalid_client` "Missing client_id"), and the `authorization_code` request model requires it
  too. With Basic, the header's (URL-decoded) client id must equal the body's ("Client ID mismatch
  in Basic auth" otherwise). This is why mcpgate sends `client_id` in the body beside Basic.
- the method the client was registered with, and only that one: a `client_secret_basic` client
  must send the Basic header (a secret in the body does not do), a `client_secret_post` client its
  secret in the body (a Basic header is ignored), a `none` client nothing.
- the metadata lists `token_endpoint_auth_methods_supported: ["client_secret_post",
  "client_secret_basic"]` (no `none`, although a DCR client may register as `none`); a registration
  without `token_endpoint_auth_method` gets `client_secret_post`; `private_key_jwt` is refused.
- the code's client, redirect URI (when one was sent to /authorize) and PKCE S256 verifier.

Tool: `whoami` returns JSON `{"subject", "client_id", "token_sha256", "scopes", "resource"}` of the
access token the call came with (the token's SHA-256, never the token itself).

Every registration, authorization and issued token is appended to `--log` as a JSON line
(`{"event": "register"|"authorize"|"token", ...}`; tokens by SHA-256 only), so a test can tell
which client and which token each caller got.

Usage: sdk_auth_server.py [--port 0] [--log FILE]
                          [--client-id ID --client-secret SECRET --redirect-uri URI]
Binds 127.0.0.1 only (port 0 = ephemeral); prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import argparse
import contextvars
import hashlib
import json
import logging
import secrets
import sys
import time
from typing import Any
from urllib.parse import parse_qs

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl
from serving import bind_loopback, serve_asgi

SCOPE = "user"
TOKEN_TTL = 3600
CODE_TTL = 300

# The `login_hint` of the /authorize request being handled (the SDK's AuthorizationParams has none).
LOGIN_HINT: contextvars.ContextVar[str | None] = contextvars.ContextVar("login_hint", default=None)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class InMemoryProvider:
    """An `OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]` that keeps
    everything in memory and approves every authorization request at once."""

    def __init__(self, log_file: str | None, preregistered: OAuthClientInformationFull | None) -> None:
        self.log_file = log_file
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access_tokens: dict[str, AccessToken] = {}
        self.refresh_tokens: dict[str, RefreshToken] = {}
        self.authorizations = 0
        if preregistered is not None:
            self.clients[preregistered.client_id] = preregistered

    def log(self, entry: dict[str, Any]) -> None:
        if self.log_file:
            with open(self.log_file, "a", encoding="utf-8") as out:
                out.write(json.dumps(entry) + "\n")

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info
        self.log({
            "event": "register",
            "client_id": client_info.client_id,
            "token_endpoint_auth_method": client_info.token_endpoint_auth_method,
            "redirect_uris": [str(u) for u in client_info.redirect_uris or []],
            "grant_types": client_info.grant_types,
            "scope": client_info.scope,
        })

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.authorizations += 1
        subject = LOGIN_HINT.get() or f"user-{self.authorizations}"
        scopes = params.scopes if params.scopes is not None else (client.scope or "").split()
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=scopes,
            expires_at=time.time() + CODE_TTL,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=subject,
        )
        self.log({"event": "authorize", "client_id": client.client_id, "subject": subject, "resource": params.resource, "scopes": scopes})
        # Approved at once: straight back to the client.
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    def issue(self, client: OAuthClientInformationFull, scopes: list[str], resource: str | None, subject: str | None, grant: str) -> OAuthToken:
        access, refresh = f"sdk-at-{secrets.token_urlsafe(24)}", f"sdk-rt-{secrets.token_urlsafe(24)}"
        expires_at = int(time.time()) + TOKEN_TTL
        self.access_tokens[access] = AccessToken(
            token=access, client_id=client.client_id, scopes=scopes, expires_at=expires_at, resource=resource, subject=subject
        )
        self.refresh_tokens[refresh] = RefreshToken(
            token=refresh, client_id=client.client_id, scopes=scopes, resource=resource, subject=subject
        )
        self.log({
            "event": "token",
            "grant_type": grant,
            "client_id": client.client_id,
            # Which way the client authenticated: the SDK accepted the request only that way.
            "token_endpoint_auth_method": client.token_endpoint_auth_method,
            "subject": subject,
            "resource": resource,
            "scopes": scopes,
            "token_sha256": digest(access),
        })
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=TOKEN_TTL, scope=" ".join(scopes), refresh_token=refresh)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError(error="invalid_grant", error_description="authorization code was used already")
        return self.issue(client, authorization_code.scopes, authorization_code.resource, authorization_code.subject, "authorization_code")

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        token = self.refresh_tokens.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        if self.refresh_tokens.pop(refresh_token.token, None) is None:
            raise TokenError(error="invalid_grant", error_description="refresh token was used already")
        return self.issue(client, scopes, refresh_token.resource, refresh_token.subject, "refresh_token")

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access_tokens.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access_tokens.pop(token.token, None)
        self.refresh_tokens.pop(token.token, None)


def with_login_hint(app: Any) -> Any:
    """ASGI wrapper: the `login_hint` of a request to /authorize, for the provider's `authorize`."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("path") == "/authorize":
            hint = parse_qs(scope.get("query_string", b"").decode()).get("login_hint", [None])[0]
            reset = LOGIN_HINT.set(hint)
            try:
                await app(scope, receive, send)
            finally:
                LOGIN_HINT.reset(reset)
            return
        await app(scope, receive, send)

    return wrapped


def build(issuer: str, provider: InMemoryProvider) -> MCPServer:
    mcp = MCPServer(
        "sdk-auth",
        instructions="An MCP server that is its own OAuth authorization server (mcp.server.auth).",
        log_level="WARNING",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=f"{issuer}/mcp",
            client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE]),
            revocation_options=RevocationOptions(enabled=True),
            required_scopes=[SCOPE],
            validate_token_resource=True,
        ),
    )

    @mcp.tool()
    def whoami() -> str:
        """Says which access token this call came with: its subject, client and SHA-256."""
        token = get_access_token()
        if token is None:
            return json.dumps({"subject": None})
        return json.dumps({
            "subject": token.subject,
            "client_id": token.client_id,
            "token_sha256": digest(token.token),
            "scopes": token.scopes,
            "resource": token.resource,
        })

    return mcp


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (0 = ephemeral)")
    ap.add_argument("--log", help="append registrations, authorizations and issued tokens here (JSON lines)")
    ap.add_argument("--client-id", help="a client registered in advance")
    ap.add_argument("--client-auth", default="client_secret_basic", help="how it authenticates: client_secret_basic or client_secret_post")
    ap.add_argument("--client-secret", help="its secret")
    ap.add_argument("--redirect-uri", help="its one redirect URI")
    args = ap.parse_args()
    if args.client_id and not (args.client_secret and args.redirect_uri):
        ap.error("--client-id needs --client-secret and --redirect-uri")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    sock = bind_loopback(args.port, "sdk_auth_server")
    issuer = f"http://127.0.0.1:{sock.getsockname()[1]}"
    preregistered = None
    if args.client_id:
        preregistered = OAuthClientInformationFull(
            client_id=args.client_id,
            client_secret=args.client_secret,
            client_id_issued_at=int(time.time()),
            client_secret_expires_at=0,
            redirect_uris=[AnyUrl(args.redirect_uri)],
            token_endpoint_auth_method=args.client_auth,
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=SCOPE,
            client_name="pre-registered",
        )
    provider = InMemoryProvider(args.log, preregistered)
    app = build(issuer, provider).streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    try:
        anyio.run(lambda: serve_asgi(with_login_hint(app), 0, "sdk_auth_server", sock=sock))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

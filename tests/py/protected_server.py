"""An OAuth-protected MCP server for the mcpgate tests, written the way everyday servers are: the
official Python SDK's `MCPServer` (mcp==2.3.0) with `auth=AuthSettings(...)` and a `token_verifier`.

The SDK serves the rest: a request without a valid token gets 401 with
`WWW-Authenticate: Bearer ..., resource_metadata="http://127.0.0.1:<port>/.well-known/oauth-protected-resource/mcp"`,
and that Protected Resource Metadata document (RFC 9728) names `resource`
`http://127.0.0.1:<port>/mcp` and the authorization server `<issuer-url>`. A token without the scope
`files:read` gets 403 insufficient_scope.

Tokens are checked by introspection (RFC 7662) at the authorization server (tests/js/oidc-as), as
its client files-rs / rs-secret: the token must be active and issued for this server's URL (`aud`).
Every token that passes is appended to <seen-tokens-file>, one per line, so a test can look for
them in the gateway's logs.

Tool: `whoami` returns `you are <sub>`, the token's subject (the account that signed in, e.g. alice).

Usage: protected_server.py <port> <issuer-url> <seen-tokens-file>
Binds 127.0.0.1 only (port 0 = ephemeral); streamable HTTP at /mcp; prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import anyio
import httpx2
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from serving import bind_loopback, serve_asgi

RS_CLIENT = ("files-rs", "rs-secret")
SCOPE = "files:read"


class IntrospectionVerifier:
    """A `TokenVerifier` asking the authorization server about each bearer token (RFC 7662)."""

    def __init__(self, issuer: str, resource: str, seen_file: str) -> None:
        self.issuer, self.resource, self.seen_file = issuer, resource, seen_file
        self.endpoint: str | None = None  # discovered on first use, so the AS may start later

    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx2.AsyncClient(timeout=10) as http:
            if self.endpoint is None:
                meta = (await http.get(f"{self.issuer}/.well-known/oauth-authorization-server")).json()
                self.endpoint = meta["introspection_endpoint"]
            reply = await http.post(self.endpoint, data={"token": token, "token_type_hint": "access_token"}, auth=RS_CLIENT)
        if reply.status_code != 200:
            print(f"protected_server: introspection answered {reply.status_code}: {reply.text}", file=sys.stderr)
            return None
        info: dict[str, Any] = reply.json()
        audiences = info.get("aud") if isinstance(info.get("aud"), list) else [info.get("aud")]
        if not info.get("active") or info.get("token_type", "Bearer") != "Bearer" or self.resource not in audiences:
            return None
        with open(self.seen_file, "a", encoding="utf-8") as seen:
            seen.write(token + "\n")
        return AccessToken(
            token=token,
            client_id=info["client_id"],
            scopes=str(info.get("scope", "")).split(),
            expires_at=info.get("exp"),
            resource=self.resource,
            subject=info.get("sub"),
            claims={"iss": info.get("iss")},
        )


def build(issuer: str, resource: str, seen_file: str) -> MCPServer:
    mcp = MCPServer(
        "files",
        instructions="A protected test server.",
        log_level="WARNING",
        token_verifier=IntrospectionVerifier(issuer, resource, seen_file),
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=resource,
            required_scopes=[SCOPE],
            validate_token_resource=True,
        ),
    )

    @mcp.tool()
    def whoami() -> str:
        """Says who the caller's token belongs to."""
        token = get_access_token()
        return f"you are {token.subject if token else 'nobody'}"

    return mcp


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: protected_server.py <port> <issuer-url> <seen-tokens-file>")
    port, issuer, seen_file = int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3]
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    sock = bind_loopback(port, "protected_server")
    resource = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    app = build(issuer, resource, seen_file).streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    try:
        anyio.run(lambda: serve_asgi(app, 0, "protected_server", sock=sock))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

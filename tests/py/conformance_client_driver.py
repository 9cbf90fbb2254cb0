"""The client half of the official conformance suite, with mcpgate as the client under test.

`conformance client --command "<this script>" --scenario S` starts a mock MCP server and runs this
script with its URL. mcpgate is the client of its upstreams, so the script makes that URL an
upstream of a fresh gateway (`prefix = ""`, the mcpgate binary named by MCPGATE_BIN), waits until
the gateway has probed it, and then drives the gateway as an everyday client would, with the
official Python SDK (mcp==2.3.0): lists the tools, then makes the calls the scenario's context
names (`toolCalls`), else calls each tool with arguments made from its input schema; it echoes a
tool's schema where the scenario asks for that (`json_schema_echo`), and accepts elicitations with
the requested schema's defaults. What the mock server checks is what the gateway sent it.

The `auth/*` scenarios make the mock server an OAuth-protected resource: the upstream gets
`[upstream.user_auth]` (per-user identity: the gateway is the OAuth client), and the script plays
the user. It lists the tools, calls the `connect` tool the gateway shows before consent, and
answers the URL elicitation that call gets by doing what a person's browser does: it opens the
consent link, submits the consent form with the page's cookie, and follows the redirects through
the suite's authorization server (which approves at once) back to the gateway's redirect URI.
Then it lists again and calls the upstream's tools, answering any further consent request (a
step-up, an authorization server that moved) the same way.

The `auth/wif-jwt-bearer` and `auth/enterprise-managed-authorization` scenarios give the gateway
an assertion (a workload JWT; an ID token of the enterprise identity provider) in a file, as a
deployment would, and the upstream gets `[upstream.oauth]` with `grant = "jwt_bearer"` or
`"id_jag"`: no person is involved, so the script only lists and calls.

The `sep-2640-client-*` scenarios (Agent Skills) make the mock a skill server: the script plays a
host that trusts the gateway, with FastMCP's client and `SkillsClientExtension`: it lists the
skills, and (but in `no-prefetch`, where nothing asks for a skill) loads each one: reads its
SKILL.md and, if that read is served, every file the skill lists. What the mock checks is whether
the host reached a file after a SKILL.md that does not match its listing: the gateway, which
checks each read against the listing, must have refused it.

Usage: conformance_client_driver.py SERVER_URL     (MCP_CONFORMANCE_SCENARIO names the scenario)
"""

from __future__ import annotations

import html
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import json

import anyio
import mcp_types as types
from mcp import Client


def value_for(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind in ("number", "integer"):
        return 2
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return arguments_for(schema)
    return "test"


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {name: value_for(prop if isinstance(prop, dict) else {}) for name, prop in props.items()}


SCENARIO = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
# The client metadata document URL the suite expects a client to use when the authorization
# server supports client metadata documents (it never fetches it).
SUITE_CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def toml_string(s: str) -> str:
    return json.dumps(s)


def gateway_config(server_url: str, folder: str, listen: str) -> str:
    upstream = f'[[upstream]]\nid = "mock"\nurl = {toml_string(server_url)}\nprefix = ""\ntimeout = "10s"\n'
    if not SCENARIO.startswith("auth/"):
        return f'[server]\nlisten = "{listen}"\n\n{upstream}'
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    identity = (
        f'[identity]\npublic_url = "http://{listen}"\nvault = {toml_string(os.path.join(folder, "vault.json"))}\n'
        f'allow_loopback = true\nclient_metadata_url = "{SUITE_CLIENT_METADATA_URL}"\n\n'
    )
    if SCENARIO in ("auth/wif-jwt-bearer", "auth/enterprise-managed-authorization"):
        return f'[server]\nlisten = "{listen}"\n\n{upstream}{assertion_grant(context, folder)}'
    if SCENARIO.startswith("auth/client-credentials"):
        secret = os.path.join(folder, "client-secret")
        with open(secret, "w") as f:
            f.write(context.get("client_secret") or context.get("private_key_pem") or "")
        oauth = f'[upstream.oauth]\nclient_id = {toml_string(context.get("client_id", ""))}\nclient_secret = {{ file = {toml_string(secret)} }}\n'
        if context.get("private_key_pem"):
            oauth += 'client_auth = "private_key_jwt"\n'
        return f'[server]\nlisten = "{listen}"\n\n{upstream}{oauth}'
    user_auth = "[upstream.user_auth]\n"
    if context.get("client_id"):
        secret = os.path.join(folder, "client-secret")
        with open(secret, "w") as f:
            f.write(context.get("client_secret", ""))
        user_auth += f'client_id = {toml_string(context["client_id"])}\nissuer = {toml_string(context.get("issuer", ""))}\n'
        user_auth += f"client_secret = {{ file = {toml_string(secret)} }}\n"
    return f'[server]\nlisten = "{listen}"\n\n{identity}{upstream}{user_auth}'


def assertion_grant(context: dict[str, Any], folder: str) -> str:
    """`[upstream.oauth]` for the assertion grants: the gateway's workload JWT (SEP-1933) or an
    identity assertion exchanged for an ID-JAG at the enterprise identity provider (SEP-990),
    each kept in a file as a deployment keeps it (a projected service-account token, say)."""

    def secret_file(name: str, value: str) -> str:
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(value)
        return toml_string(path)

    oauth = f'[upstream.oauth]\nclient_id = {toml_string(context.get("client_id", ""))}\n'
    if SCENARIO == "auth/wif-jwt-bearer":
        return oauth + f'grant = "jwt_bearer"\nassertion = {{ file = {secret_file("workload.jwt", context["valid_jwt"])} }}\n'
    oauth += f'client_secret = {{ file = {secret_file("client-secret", context["client_secret"])} }}\n'
    oauth += f'grant = "id_jag"\nassertion = {{ file = {secret_file("id-token", context["idp_id_token"])} }}\n'
    return oauth + f'idp_token_url = {toml_string(context["idp_token_endpoint"])}\nidp_client_id = {toml_string(context["idp_client_id"])}\n'


def start_gateway(server_url: str) -> tuple[subprocess.Popen[str], str]:
    binary = os.environ.get("MCPGATE_BIN") or "mcpgate"
    folder = tempfile.mkdtemp(prefix="mcpgate-client-conformance-")
    config = os.path.join(folder, "gateway.toml")
    # The consent pages need a public URL known before the gateway starts: a port picked here.
    listen = f"127.0.0.1:{free_port()}" if SCENARIO.startswith("auth/") else "127.0.0.1:0"
    with open(config, "w") as f:
        f.write(gateway_config(server_url, folder, listen))
    gw = subprocess.Popen([binary, "run", "-c", config, "--listen", listen], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert gw.stderr is not None
    url = ""
    deadline = time.time() + 20
    for line in gw.stderr:
        sys.stderr.write(line)
        if "listening on http" in line:
            url = line[line.index("listening on ") + len("listening on ") :].strip()
            break
        if time.time() > deadline:
            break
    if not url:
        gw.kill()
        sys.exit("the gateway did not start")
    # Keep reading the gateway's log, so it never waits on a full pipe; MCPGATE_DRIVER_LOG keeps it.
    threading.Thread(target=drain, args=(gw.stderr, os.environ.get("MCPGATE_DRIVER_LOG")), daemon=True).start()
    base = url.rsplit("/mcp", 1)[0]
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        time.sleep(0.05)
    return gw, url


def drain(stream: Any, path: str | None) -> None:
    sink = open(path, "a") if path else None
    for line in stream:
        if sink:
            sink.write(line)
            sink.flush()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def fetch(url: str, data: bytes | None = None, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
    """One request, redirects not followed: status, headers (lower-cased names), body."""
    req = urllib.request.Request(url, data=data)
    if cookie:
        req.add_header("Cookie", cookie)
    if data is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with OPENER.open(req, timeout=15) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode("utf-8", "replace")


def consent_in_browser(link: str) -> None:
    """What a person does with a consent link: open it, allow, sign in (the suite's authorization
    server approves at once), and come back to the gateway."""
    status, headers, page = fetch(link)
    sys.stderr.write(f"consent page: HTTP {status}\n")
    cookie = (headers.get("set-cookie") or "").split(";", 1)[0]
    fields = dict(re.findall(r'name="(grant|csrf)" value="([^"]*)"', page))
    if status != 200 or "grant" not in fields:
        sys.stderr.write(f"no consent form: {page[:300]}\n")
        return
    form = urllib.parse.urlencode({k: html.unescape(v) for k, v in fields.items()}).encode()
    base = link.split("/oauth/", 1)[0]
    status, headers, page = fetch(f"{base}/oauth/connect", data=form, cookie=cookie)
    for _ in range(6):
        location = headers.get("location")
        if status not in (301, 302, 303, 307, 308) or not location:
            break
        location = urllib.parse.urljoin(base, location)
        status, headers, page = fetch(location, cookie=cookie if location.startswith(base) else None)
    sys.stderr.write(f"consent finished: HTTP {status}: {re.sub('<[^>]+>', ' ', page)[:200]}\n")


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accepts with the values the requested schema gives as defaults (else plain ones); a URL
    elicitation (the gateway's consent) is done in the "browser" first."""
    if getattr(params, "mode", None) == "url":
        await anyio.to_thread.run_sync(consent_in_browser, params.url)
        return types.ElicitResult(action="accept")
    schema = getattr(params, "requested_schema", None) or {}
    if hasattr(schema, "model_dump"):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    return types.ElicitResult(action="accept", content=arguments_for(schema if isinstance(schema, dict) else {}))


def planned_calls(tools: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if context.get("toolCalls"):
        return [(c["name"], c.get("arguments") or {}) for c in context["toolCalls"]]
    names = {t.name for t in tools}
    calls = []
    for tool in tools:
        if tool.name == "json_schema_echo":
            continue
        calls.append((tool.name, arguments_for(tool.input_schema or {})))
    if "json_schema_echo" in names:
        focal = next((t for t in tools if t.name != "json_schema_echo"), None)
        if focal is not None:
            calls.append(("json_schema_echo", {"schema": focal.input_schema}))
    return calls


def is_connect_tool(tool: Any) -> bool:
    meta = getattr(tool, "meta", None) or {}
    return "io.mcpgate/consent" in meta


async def drive(url: str) -> None:
    async with Client(url, mode="2026-07-28", read_timeout_seconds=20, elicitation_callback=on_elicit) as client:
        tools = (await client.list_tools()).tools
        # An upstream that needs the user's consent shows a `connect` tool until it has it.
        for _ in range(3):
            connect = [t for t in tools if is_connect_tool(t)]
            if not connect:
                break
            for tool in connect:
                try:
                    await client.call_tool(tool.name, {})
                except Exception as exc:  # noqa: BLE001 - a refusal is the mock's to judge
                    sys.stderr.write(f"connect {tool.name}: {exc}\n")
            tools = (await client.list_tools()).tools
        tools = [t for t in tools if not is_connect_tool(t)]
        for name, arguments in planned_calls(tools):
            try:
                await client.call_tool(name, arguments)
            except Exception as exc:  # noqa: BLE001 - a refused call is the mock's to judge
                sys.stderr.write(f"call {name}: {exc}\n")


async def drive_skills(url: str) -> None:
    from fastmcp import Client as FastMCPClient
    from fastmcp.skills import SkillsClientExtension

    async with FastMCPClient(url, extensions=[SkillsClientExtension()]) as client:
        skills = await client.list_skills()
        if SCENARIO == "sep-2640-client-no-prefetch":
            return
        for skill in skills:
            try:
                await client.read_resource(skill.uri)
            except Exception as exc:  # noqa: BLE001 - a refused SKILL.md: the skill is not loaded
                sys.stderr.write(f"skill {skill.uri} not loaded: {exc}\n")
                continue
            files = skill.resources if isinstance(skill.resources, list) else []
            for f in files:
                if f.uri != skill.uri:
                    try:
                        await client.read_resource(f.uri)
                    except Exception as exc:  # noqa: BLE001 - the mock judges what was read
                        sys.stderr.write(f"read {f.uri}: {exc}\n")


def main() -> int:
    gw, url = start_gateway(sys.argv[1])
    try:
        anyio.run(drive_skills if SCENARIO.startswith("sep-2640-client-") else drive, url)
    finally:
        gw.terminate()
        try:
            gw.wait(timeout=5)
        except subprocess.TimeoutExpired:
            gw.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())

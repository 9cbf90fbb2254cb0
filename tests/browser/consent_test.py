"""Two callers connect the same OAuth-protected upstream through mcpgate, each with their own
account, in headless Chromium (Debian's chromium + chromedriver, through Selenium WebDriver).

Each caller is an everyday MCP client (the official Python SDK, protocol 2026-07-28, its API key
as the bearer). It lists the tools, sees the upstream's `connect` tool, calls it, and gets a URL
elicitation; its elicitation handler does what the person does: opens the link in the browser,
reads the gateway's consent page, continues to the authorization server, signs in as the user,
approves, and lands back on the gateway. The retry succeeds, the upstream's tools are listed, and
`whoami` (answered by the upstream from the token it validated) names the user. Then alice's
accounts are revoked through the gateway's API: her next call asks for consent again (declined
here), while bob's still goes through.

Usage: consent_test.py GATEWAY_BASE KEY_ALICE KEY_BOB SCREENSHOT_DIR
Prints one JSON line per step; any failed expectation raises and exits non-zero.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from chrome import browser
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def heading(d: webdriver.Chrome) -> str:
    """The page's h1 (empty while a navigation replaces the page under it)."""
    try:
        found = d.find_elements(By.TAG_NAME, "h1")
        return found[0].text if found else ""
    except StaleElementReferenceException:
        return ""



def consent_in_browser(d: webdriver.Chrome, link: str, user: str, shots: str, base: str) -> None:
    """What the person does with the link the client shows."""
    wait = WebDriverWait(d, 20, ignored_exceptions=(StaleElementReferenceException,))
    d.get(link)
    wait.until(lambda d: heading(d).startswith("Connect "))
    page = d.page_source
    assert user in page and "files" in page, "the consent page names the caller and the upstream"
    if user == "alice":
        d.save_screenshot(os.path.join(shots, "consent-page.png"))
    d.find_element(By.ID, "allow").click()
    # The authorization server's sign-in page.
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "input[name=login]"))
    d.find_element(By.CSS_SELECTOR, "input[name=login]").send_keys(user)
    d.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys("any password")
    d.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    # Its consent page (skipped when this account already approved this client), then back home.
    wait.until(lambda d: heading(d) in ("Authorize",) or d.current_url.startswith(base))
    if heading(d) == "Authorize":
        d.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: d.current_url.startswith(base + "/oauth/callback") and heading(d).startswith("Connected"))
    if user == "alice":
        d.save_screenshot(os.path.join(shots, "consent-done.png"))
    emit(step="consented", user=user, page=heading(d))


def client(url: str, key: str, on_elicit: Any) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode="2026-07-28", read_timeout_seconds=30, elicitation_callback=on_elicit)


def text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def connect_and_call(d: webdriver.Chrome, url: str, base: str, user: str, key: str, shots: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert getattr(params, "mode", None) == "url", params
        asked.append(params.url)
        await anyio.to_thread.run_sync(consent_in_browser, d, params.url, user, shots, base)
        return types.ElicitResult(action="accept")

    async with client(url, key, on_elicit) as c:
        names = [t.name for t in (await c.list_tools()).tools]
        assert names == ["files__connect"], f"{user} sees only the connect tool before consenting: {names}"
        connected = await c.call_tool("files__connect", {})
        assert not connected.is_error and len(asked) == 1, (text(connected), asked)
        names = [t.name for t in (await c.list_tools()).tools]
        assert "files__whoami" in names and "files__connect" not in names, names
        who = text(await c.call_tool("files__whoami", {}))
        assert who == f"you are {user}", who
        emit(step="called", user=user, whoami=who, tools=names)


async def after_revoke(url: str, base: str, keys: dict[str, str]) -> None:
    req = urllib.request.Request(f"{base}/oauth/tokens/revoke", data=b"{}", method="POST",
                                 headers={"Authorization": f"Bearer {keys['alice']}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        revoked = json.loads(r.read())["revoked"]
    assert revoked == 1, revoked
    asked: list[str] = []

    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(getattr(params, "url", ""))
        return types.ElicitResult(action="decline")

    async with client(url, keys["alice"], decline) as c:
        names = [t.name for t in (await c.list_tools()).tools]
        assert names == ["files__connect"], f"alice consents again: {names}"
        try:
            await c.call_tool("files__whoami", {})
        except Exception as exc:  # noqa: BLE001 - a declined consent may end the call either way
            emit(step="declined", error=str(exc)[:200])
        assert len(asked) >= 1 and "/oauth/connect?grant=" in asked[0], asked
    async with client(url, keys["bob"], decline) as c:
        who = text(await c.call_tool("files__whoami", {}))
        assert who == "you are bob", who
    emit(step="revoked", alice_asked_again=True, bob="you are bob")


async def main_async(base: str, keys: dict[str, str], shots: str) -> None:
    url = f"{base}/mcp"
    d = browser("1000,800")
    try:
        for user in ("alice", "bob"):
            # Each person has their own browser (cookies of the last one go).
            if d.current_url.startswith("http"):
                d.delete_all_cookies()
            await connect_and_call(d, url, base, user, keys[user], shots)
    finally:
        d.quit()
    await after_revoke(url, base, keys)


def main() -> None:
    base, alice, bob, shots = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    os.makedirs(shots, exist_ok=True)
    anyio.run(main_async, base.rstrip("/"), {"alice": alice, "bob": bob}, shots)
    print("ok", flush=True)


if __name__ == "__main__":
    main()

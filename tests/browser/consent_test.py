"""Two callers connect the same OAuth-protected upstream through mcpgate, each with their own
account, in headless Chromium (Debian's chromium + chromedriver, through Selenium WebDriver).

Each caller is an everyday MCP client (the official Python SDK, protocol 2026-07-28, its API key
as the bearer). It lists the tools, sees the upstream's `connect` tool, calls it, and gets a URL
elicitation; its elicitation handler does what the person does: opens the link in the browser,
signs in to the gateway as the caller (its API key, on the page), reads the consent page, continues
to the authorization server, signs in as the user, approves, and lands back on the gateway. The
retry succeeds, the upstream's tools are listed, and `whoami` (answered by the upstream from the
token it validated) names the user.

Then the phishing case of the spec's URL-mode elicitation: mallory's client is sent to consent and
mallory hands the link to bob. Bob's browser (signed in at the authorization server from his own
consent) opens it: the gateway asks him to sign in as mallory; his own key is refused as another
caller's, and the consent form, posted without that sign-in, is refused too. In a second browser
alice (signed in there as well) opens bob's next link, leaked: refused the same way. Mallory still
has nothing connected, and a link, once used, does not start a second authorization. Finally
alice's accounts are revoked through the gateway's API: her next call asks for consent again
(declined here), while bob's still goes through.

Usage: consent_test.py GATEWAY_BASE KEY_ALICE KEY_BOB KEY_MALLORY SCREENSHOT_DIR
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
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def heading(d: webdriver.Chrome) -> str:
    """The page's h1 (empty while a navigation replaces the page under it: the element found may
    belong to the page being left, which Chrome reports as stale or, for a node of a document it
    has already dropped, as an inspector error)."""
    try:
        found = d.find_elements(By.TAG_NAME, "h1")
        return found[0].text if found else ""
    except StaleElementReferenceException:
        return ""
    except WebDriverException as e:
        if "does not belong to the document" in str(e):
            return ""
        raise



def sign_in_as(d: webdriver.Chrome, key: str) -> None:
    """The gateway's sign-in page: the caller's API key, typed in."""
    d.find_element(By.ID, "key").send_keys(key)
    d.find_element(By.ID, "sign-in").click()


def consent_in_browser(d: webdriver.Chrome, link: str, user: str, key: str, shots: str, base: str) -> None:
    """What the person does with the link the client shows."""
    wait = WebDriverWait(d, 20, ignored_exceptions=(StaleElementReferenceException,))
    d.get(link)
    wait.until(lambda d: heading(d) == f"Sign in as {user}")
    if user == "alice":
        d.save_screenshot(os.path.join(shots, "consent-sign-in.png"))
    sign_in_as(d, key)
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
        await anyio.to_thread.run_sync(consent_in_browser, d, params.url, user, key, shots, base)
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


async def link_for(url: str, key: str) -> str:
    """A fresh consent link of the caller with `key`, as its client is shown it (not opened)."""
    links: list[str] = []

    async def keep(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        links.append(params.url)
        return types.ElicitResult(action="decline")

    async with client(url, key, keep) as c:
        try:
            await c.call_tool("files__connect", {})
        except Exception:  # noqa: BLE001 - a declined consent may end the call either way
            pass
    assert links and all("/oauth/connect?grant=" in link for link in links), links
    return links[-1]


def refused_as_another_caller(d: webdriver.Chrome, link: str, owner: str, own_key: str) -> None:
    """Someone who is not the link's caller opens it: asked to sign in as the owner, their own key
    is refused, and the consent form, posted without that sign-in, is refused as well."""
    wait = WebDriverWait(d, 20, ignored_exceptions=(StaleElementReferenceException,))
    d.get(link)
    wait.until(lambda d: heading(d) == f"Sign in as {owner}")
    assert d.find_elements(By.ID, "key") and not d.find_elements(By.ID, "allow"), "no consent before the sign-in"
    grant = d.find_element(By.NAME, "grant").get_attribute("value")
    csrf = d.find_element(By.NAME, "csrf").get_attribute("value")
    sign_in_as(d, own_key)
    wait.until(lambda d: heading(d) == "Not your link")
    # The consent form itself, posted from this browser with the page's own tokens.
    d.get(link)
    wait.until(lambda d: heading(d) == f"Sign in as {owner}")
    assert d.find_elements(By.ID, "other"), "the page says this browser is someone else"
    d.execute_script(
        "const f=document.createElement('form');f.method='post';f.action='/oauth/connect';"
        "for (const [k,v] of [['grant',arguments[0]],['csrf',arguments[1]]]) {"
        "const i=document.createElement('input');i.type='hidden';i.name=k;i.value=v;f.appendChild(i);}"
        "document.body.appendChild(f);f.submit();",
        grant,
        csrf,
    )
    wait.until(lambda d: heading(d) == "Not your link")
    assert "127.0.0.1" in d.current_url and "/oauth/connect" in d.current_url, d.current_url


async def phishing(url: str, base: str, keys: dict[str, str], victim: webdriver.Chrome, other: webdriver.Chrome) -> None:
    # Mallory's link, opened by bob (the victim) in his own browser.
    link = await link_for(url, keys["mallory"])
    await anyio.to_thread.run_sync(refused_as_another_caller, victim, link, "mallory", keys["bob"])
    # Another of mallory's links, leaked to alice (the reverse: it would bind alice's account to
    # mallory), opened in alice's browser.
    leaked = await link_for(url, keys["mallory"])
    await anyio.to_thread.run_sync(refused_as_another_caller, other, leaked, "mallory", keys["alice"])

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with client(url, keys["mallory"], never) as c:
        names = [t.name for t in (await c.list_tools()).tools]
        assert names == ["files__connect"], f"nothing was connected for mallory: {names}"
    emit(step="phishing refused", mallory_tools=names)


def single_use(d: webdriver.Chrome, link: str, key: str, owner: str) -> None:
    """The owner uses a link once; the same link does not start a second authorization."""
    wait = WebDriverWait(d, 20, ignored_exceptions=(StaleElementReferenceException,))
    for attempt in (1, 2):
        d.get(link)
        wait.until(lambda d: heading(d) in (f"Sign in as {owner}", f"Connect files"))
        if heading(d) == f"Sign in as {owner}":
            sign_in_as(d, key)
            wait.until(lambda d: heading(d) == "Connect files")
        d.find_element(By.ID, "allow").click()
        if attempt == 1:
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "input[name=login]"))
        else:
            wait.until(lambda d: heading(d) == "Cannot connect")
            assert "used already" in d.page_source, d.page_source
    emit(step="single use", owner=owner)


async def main_async(base: str, keys: dict[str, str], shots: str) -> None:
    url = f"{base}/mcp"
    # Each person has their own browser.
    browsers = {user: browser("1000,800") for user in ("alice", "bob")}
    try:
        for user in ("alice", "bob"):
            await connect_and_call(browsers[user], url, base, user, keys[user], shots)
        await phishing(url, base, keys, browsers["bob"], browsers["alice"])
        link = await link_for(url, keys["mallory"])
        await anyio.to_thread.run_sync(single_use, browsers["alice"], link, keys["mallory"], "mallory")
    finally:
        for d in browsers.values():
            d.quit()
    await after_revoke(url, base, keys)


def main() -> None:
    base, alice, bob, mallory, shots = sys.argv[1:6]
    os.makedirs(shots, exist_ok=True)
    anyio.run(main_async, base.rstrip("/"), {"alice": alice, "bob": bob, "mallory": mallory}, shots)
    print("ok", flush=True)


if __name__ == "__main__":
    main()

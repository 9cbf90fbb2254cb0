"""Drives a real MCP Apps host in headless Chromium (Debian's chromium + chromedriver, through
Selenium WebDriver) against the gateway: the page tests/js/apps-host/index.html, built on the MCP
TypeScript client and ext-apps' AppBridge (bundled by scripts/install-test-deps.sh), is served
from a loopback origin of its own, connects to the gateway (a cross-origin client, through the
gateway's CORS), renders the app from the gateway's ui:// resource, and the app's "Get Server Time"
button calls its server's tool through the gateway and shows the time.

Usage: apps_host_test.py PAGE_DIR GATEWAY_URL TOOL SCREENSHOT_PATH
Prints "ok: <time> <screenshot path>" on success; any failed expectation raises and exits non-zero.
"""
import functools
import http.server
import os
import sys
import threading
import urllib.parse

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from console_test import browser


def serve(directory):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    page_dir, gateway, tool, shot = sys.argv[1:5]
    server = serve(page_dir)
    query = urllib.parse.urlencode({"gateway": gateway, "tool": tool})
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html?{query}"
    d = browser()
    try:
        d.get(url)
        wait = WebDriverWait(d, 30)

        def host_status(drv):
            text = drv.find_element(By.ID, "status").text
            if text.startswith("error"):
                raise AssertionError(f"the host failed: {text}")
            return text == "app initialized"

        wait.until(host_status)
        resource = d.find_element(By.ID, "resource").text
        assert resource.startswith("ui://"), resource
        d.switch_to.frame(d.find_element(By.ID, "app"))
        shown = d.find_element(By.ID, "server-time").text
        d.find_element(By.ID, "get-time-btn").click()
        wait.until(lambda drv: drv.find_element(By.ID, "server-time").text not in ("", shown))
        time = d.find_element(By.ID, "server-time").text
        assert "T" in time or ":" in time, f"the app shows no time: {time!r}"
        d.switch_to.default_content()
        os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
        assert d.save_screenshot(shot), "no screenshot"
        print(f"ok: {time} {os.path.abspath(shot)}")
    finally:
        d.quit()
        server.shutdown()


if __name__ == "__main__":
    main()

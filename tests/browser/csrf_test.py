"""A page on another loopback origin tries to approve a held tool through the console API of a
gateway without authentication, in headless Chromium (Debian's chromium + chromedriver, through
Selenium WebDriver): a `text/plain` POST (a "simple" request, sent without a preflight), a form
POST, and a JSON POST (preflighted). None may approve it. Then the console itself, from the
gateway's own origin, approves it with its Approve button.

Usage: csrf_test.py GATEWAY_BASE UPSTREAM TOOL CONSOLE_KEY   (the key the gateway logged at start)
Prints "ok: refused cross-origin, approved from the console" on success; any failed expectation
raises and exits non-zero.
"""
import http.server
import json
import sys
import threading
import time
import urllib.request

from chrome import browser
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ATTACK = """<!doctype html><html><body><p id="status">running</p>
<form id="f" method="POST" enctype="text/plain" target="sink" action="{approve}">
<input name='{{"upstream":"{upstream}","tool":"{tool}","x":"' value='"}}'></form>
<iframe name="sink"></iframe>
<script>
(async () => {{
  const body = JSON.stringify({{ upstream: "{upstream}", tool: "{tool}" }});
  const tries = [];
  try {{ await fetch("{approve}", {{ method: "POST", mode: "no-cors", headers: {{ "Content-Type": "text/plain" }}, body }}); tries.push("text"); }}
  catch (e) {{ tries.push("text failed " + e); }}
  try {{ await fetch("{approve}", {{ method: "POST", headers: {{ "Content-Type": "application/json" }}, body }}); tries.push("json"); }}
  catch (e) {{ tries.push("json failed " + e); }}
  document.getElementById("f").submit();
  await new Promise((r) => setTimeout(r, 1000));
  document.getElementById("status").textContent = "done: " + tries.join(", ");
}})();
</script></body></html>"""


def serve(page: str) -> http.server.ThreadingHTTPServer:
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


KEY = ""


def held(base: str) -> list[str]:
    req = urllib.request.Request(f"{base}/console/api/state", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return [f"{h['upstream']}/{h['tool']}" for h in json.loads(r.read()).get("held", [])]


def main() -> None:
    global KEY
    base, upstream, tool, KEY = sys.argv[1:5]
    want = f"{upstream}/{tool}"
    assert held(base) == [want], held(base)
    server = serve(ATTACK.format(approve=f"{base}/console/api/pins/approve", upstream=upstream, tool=tool))
    d = browser()
    try:
        d.get(f"http://127.0.0.1:{server.server_address[1]}/attack.html")
        WebDriverWait(d, 20).until(lambda drv: drv.find_element(By.ID, "status").text.startswith("done"))
        print(d.find_element(By.ID, "status").text, file=sys.stderr)
        time.sleep(0.5)
        assert held(base) == [want], f"a page on another origin approved {want}"

        d.get(f"{base}/console#key={KEY}")
        wait = WebDriverWait(d, 20)
        wait.until(lambda drv: len(drv.find_elements(By.CSS_SELECTOR, "#held tbody button.approve")) == 1)
        d.find_element(By.CSS_SELECTOR, "#held tbody button.approve").click()

        def approved(drv) -> bool:
            try:
                raise AssertionError(f"the console could not approve: {drv.switch_to.alert.text}")
            except AssertionError:
                raise
            except Exception:
                return held(base) == []

        wait.until(approved)
        print("ok: refused cross-origin, approved from the console")
    finally:
        d.quit()


if __name__ == "__main__":
    main()

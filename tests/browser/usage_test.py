"""Drives the console's usage view in headless Chromium: signs in with an API key and checks the
usage table shows exactly the expected callers' rows (an admin sees everyone, any other caller
only itself, with the admin sections hidden), with calls and errors as counted.

Usage: usage_test.py CONSOLE_URL API_KEY EXPECTED_JSON
EXPECTED_JSON: {"admin": bool, "rows": [[caller, tool, endpoint, calls, errors], ...]}
Prints "ok" on success; any failed expectation raises and exits non-zero.
"""
import json
import sys

from chrome import browser
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait


def rows(d):
    out = []
    for r in d.find_elements(By.CSS_SELECTOR, "#usage tbody tr"):
        c = [td.text for td in r.find_elements(By.TAG_NAME, "td")]
        out.append([c[0], c[1], c[3], int(c[4]), int(c[6])])
    return sorted(out)


def main():
    url, key, expected = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    d = browser()
    try:
        d.get(url)
        wait = WebDriverWait(d, 20)
        wait.until(ec.visibility_of_element_located((By.ID, "key"))).send_keys(key)
        d.find_element(By.CSS_SELECTOR, "#login-form button").click()
        wait.until(ec.visibility_of_element_located((By.ID, "app")))
        want = sorted(expected["rows"])
        wait.until(lambda d: rows(d) == want)
        admin_visible = any(s.is_displayed() for s in d.find_elements(By.CSS_SELECTOR, "section.admin"))
        assert admin_visible == expected["admin"], f"admin sections shown: {admin_visible}"
        scope = d.find_element(By.ID, "usage-scope").text
        assert scope == ("(every caller)" if expected["admin"] else "(your calls)"), scope
        print("ok")
    finally:
        d.quit()


if __name__ == "__main__":
    main()

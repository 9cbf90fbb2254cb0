"""Drives the console's held-tools list in headless Chromium (Debian's chromium + chromedriver,
through Selenium WebDriver): the held tool TOOL is listed with its full definition shown, and
clicking Approve approves it (the page sends the fingerprint of the definition it showed; the
gateway refuses an approval without one), after which it leaves the held list.

Usage: console_pins_test.py CONSOLE_URL TOOL EXPECTED_TEXT
Prints "ok" on success; any failed expectation raises and exits non-zero.
"""
import sys

from chrome import browser
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait


def held_row(d, tool):
    """The held list's row for `tool`, None when there is none, or False while the list is redrawn."""
    try:
        for r in d.find_elements(By.CSS_SELECTOR, "#held tbody tr"):
            if r.find_elements(By.TAG_NAME, "td")[1].text == tool:
                return r
    except StaleElementReferenceException:
        return False
    return None


def main():
    url, tool, expected = sys.argv[1], sys.argv[2], sys.argv[3]
    d = browser()
    try:
        d.get(url)
        wait = WebDriverWait(d, 20)
        wait.until(ec.visibility_of_element_located((By.ID, "app")))
        wait.until(lambda d: held_row(d, tool))
        row = held_row(d, tool)
        definition = row.find_element(By.CSS_SELECTOR, "details.definition pre").text
        assert expected in definition and "inputSchema" in definition, definition
        assert "fingerprint" in row.find_element(By.CSS_SELECTOR, "details.definition summary").text
        row.find_element(By.CSS_SELECTOR, "button.approve").click()
        wait.until(lambda d: held_row(d, tool) is None)
        print("ok")
    finally:
        d.quit()


if __name__ == "__main__":
    main()

"""Drives the mcpgate console in headless Chromium (Debian's chromium + chromedriver, through
Selenium WebDriver): the page loads, shows the running gateway's upstreams, filters the
catalogue, and a screenshot is written.

Usage: console_test.py CONSOLE_URL SCREENSHOT_PATH [API_KEY]
Prints "ok: <screenshot path>" on success; any failed expectation raises and exits non-zero.
"""
import os
import sys

from chrome import browser
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait


def main():
    url, shot = sys.argv[1], sys.argv[2]
    key = sys.argv[3] if len(sys.argv) > 3 else None
    d = browser()
    try:
        d.get(url)
        wait = WebDriverWait(d, 20)
        if key:
            wait.until(ec.visibility_of_element_located((By.ID, "key"))).send_keys(key)
            d.find_element(By.CSS_SELECTOR, "#login-form button").click()
        wait.until(ec.visibility_of_element_located((By.ID, "app")))
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#upstreams tbody tr")) >= 2)
        upstreams = [r.find_element(By.TAG_NAME, "td").text for r in d.find_elements(By.CSS_SELECTOR, "#upstreams tbody tr")]
        assert "calc" in upstreams and "text" in upstreams, upstreams
        health = [r.find_elements(By.TAG_NAME, "td")[3].text for r in d.find_elements(By.CSS_SELECTOR, "#upstreams tbody tr")]
        assert all(h == "ready" for h in health), health
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#catalog tbody tr")) >= 10)
        d.find_element(By.ID, "filter").send_keys("multiply")
        wait.until(lambda d: [r.get_attribute("data-name") for r in d.find_elements(By.CSS_SELECTOR, "#catalog tbody tr:not(.hidden)")] == ["calc__multiply"])
        assert "1 of" in d.find_element(By.ID, "catalog-count").text
        wait.until(lambda d: d.find_element(By.ID, "live").text == "live")
        os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
        d.find_element(By.ID, "filter").clear()
        d.find_element(By.ID, "filter").send_keys(" ")
        assert d.save_screenshot(shot), "no screenshot"
        print(f"ok: {os.path.abspath(shot)}")
    finally:
        d.quit()


if __name__ == "__main__":
    main()

"""Drives the mcpgate console in headless Chromium (Debian's chromium + chromedriver, through
Selenium WebDriver): the page loads, shows the running gateway's upstreams, filters the
catalogue, and a screenshot is written.

Usage: console_test.py CONSOLE_URL SCREENSHOT_PATH [API_KEY]
Prints "ok: <screenshot path>" on success; any failed expectation raises and exits non-zero.
"""
import os
import shutil
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait


def browser():
    driver_path = os.environ.get("MCPGATE_CHROMEDRIVER") or shutil.which("chromedriver")
    chrome_path = os.environ.get("MCPGATE_CHROMIUM") or shutil.which("chromium")
    if not driver_path or not chrome_path:
        sys.exit("chromium and chromedriver are missing: run scripts/install-test-deps.sh (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome_path
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(driver_path), options=opts)


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

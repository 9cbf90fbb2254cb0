"""The headless Chromium the browser tests drive: Debian's chromium and chromium-driver (paths from
MCPGATE_CHROMIUM and MCPGATE_CHROMEDRIVER, which scripts/install-test-deps.sh writes, else PATH),
through Selenium WebDriver. A missing browser fails the test and says what to install."""

from __future__ import annotations

import os
import shutil
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def browser(size: str = "1280,900") -> webdriver.Chrome:
    driver_path = os.environ.get("MCPGATE_CHROMEDRIVER") or shutil.which("chromedriver")
    chrome_path = os.environ.get("MCPGATE_CHROMIUM") or shutil.which("chromium")
    if not driver_path or not chrome_path:
        sys.exit("chromium and chromedriver are missing: run scripts/install-test-deps.sh (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome_path
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={size}"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(driver_path), options=opts)

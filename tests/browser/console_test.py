"""Drives the mcpgate console in headless Chromium (Debian's chromium + chromedriver, through
Selenium WebDriver): before a key is given, the key prompt's live badge is neutral (grey "waiting
for a key", not the red of an error); the first screen (1280x900, nothing scrolled) shows health at a glance, the
recent calls and the tools held for review; the upstreams are listed; the catalogue is collapsed
and, opened, filters; a screenshot of the first screen is written.

Usage: console_test.py CONSOLE_URL SCREENSHOT_PATH [API_KEY]
Prints "ok: <screenshot path>" on success; any failed expectation raises and exits non-zero.
"""
import os
import sys

from chrome import browser
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait


def rgb(css):
    """(r, g, b) of a CSS colour as Chromium reports it: rgb(...) or rgba(...)."""
    inside = css[css.index("(") + 1 : css.index(")")]
    return tuple(int(float(p)) for p in inside.split(",")[:3])


def main():
    url, shot = sys.argv[1], sys.argv[2]
    key = sys.argv[3] if len(sys.argv) > 3 else None
    d = browser()
    try:
        wait = WebDriverWait(d, 20)
        # Without the key (the link's fragment, or the argument): the prompt, and a neutral badge.
        d.get(url.split("#")[0])
        wait.until(ec.visibility_of_element_located((By.ID, "login")))
        wait.until(lambda d: d.find_element(By.ID, "live").text == "waiting for a key")
        badge = d.find_element(By.ID, "live")
        assert "off" not in badge.get_attribute("class").split(), badge.get_attribute("class")
        red, green, blue = rgb(badge.value_of_css_property("color"))
        assert not (red > 150 and green < 100 and blue < 100), f"the badge at the key prompt reads as an error: {badge.value_of_css_property('color')}"
        # Then with it (a fragment change alone does not load the page again).
        d.get(url)
        d.refresh()
        if key:
            wait.until(ec.visibility_of_element_located((By.ID, "key"))).send_keys(key)
            d.find_element(By.CSS_SELECTOR, "#login-form button").click()
        wait.until(ec.visibility_of_element_located((By.ID, "app")))
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#upstreams tbody tr")) >= 2)
        upstreams = [r.find_element(By.TAG_NAME, "td").text for r in d.find_elements(By.CSS_SELECTOR, "#upstreams tbody tr")]
        assert "calc" in upstreams and "text" in upstreams, upstreams
        health = [r.find_elements(By.TAG_NAME, "td")[3].text for r in d.find_elements(By.CSS_SELECTOR, "#upstreams tbody tr")]
        assert all(h == "ready" for h in health), health
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#calls tbody tr")) >= 3)
        wait.until(lambda d: d.find_element(By.ID, "live").text == "live")
        wait.until(lambda d: "calls" in d.find_element(By.CSS_SELECTOR, "#health-usage .value").text)

        # The first screen, unscrolled: health, recent calls and the held tool, all in view.
        height = d.execute_script("return window.innerHeight")
        def in_view(sel):
            el = d.find_element(By.CSS_SELECTOR, sel)
            top = d.execute_script("return arguments[0].getBoundingClientRect().top", el)
            return el.is_displayed() and 0 <= top < height
        for sel in ("#health", "#health-upstreams", "#health-held", "#calls-section", "#held-section"):
            assert in_view(sel), f"{sel} is not on the first screen"
        assert d.find_element(By.CSS_SELECTOR, "#health-upstreams .value").text == "2 of 2 up"
        assert d.find_element(By.CSS_SELECTOR, "#health-held .value").text == "1"
        held = [r.find_elements(By.TAG_NAME, "td")[1].text for r in d.find_elements(By.CSS_SELECTOR, "#held tbody tr")]
        assert held == ["divide"], held
        items = [r.find_elements(By.TAG_NAME, "td")[3].text for r in d.find_elements(By.CSS_SELECTOR, "#calls tbody tr")]
        assert "calc__add" in items and "text__upper" in items, items
        # The catalogue is collapsed: it does not push the rest down.
        assert not d.find_element(By.ID, "filter").is_displayed(), "the catalogue starts collapsed"
        os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
        assert d.save_screenshot(shot), "no screenshot"

        # Opened, it is searchable.
        d.find_element(By.CSS_SELECTOR, "#catalog-section > summary").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#catalog tbody tr")) >= 4)
        d.find_element(By.ID, "filter").send_keys("multiply")
        wait.until(lambda d: [r.get_attribute("data-name") for r in d.find_elements(By.CSS_SELECTOR, "#catalog tbody tr:not(.hidden)")] == ["calc__multiply"])
        assert "1 of" in d.find_element(By.ID, "catalog-count").text
        print(f"ok: {os.path.abspath(shot)}")
    finally:
        d.quit()


if __name__ == "__main__":
    main()

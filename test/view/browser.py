"""Headless Chromium (Debian's chromium and chromium-driver) driven by selenium for the view's
tests: WebGL through the SwiftShader software renderer."""
import io
import os
import shutil
import time

import numpy as np

CHROMIUM = os.environ.get("MBSIM_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MBSIM_CHROMEDRIVER", "/usr/bin/chromedriver")
WIDTH, HEIGHT = 800, 560     # the window; the page gets about 800 x 420 of it
PANEL = 340                  # px, the control panel's width at the page's right edge (and its margin)
FLAGS = ["--headless=new", "--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
         "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}",
         "--force-device-scale-factor=1"]


def missing():
    """Why no browser test can run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) or shutil.which(path)):
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    return None


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    options = Options()
    for flag in FLAGS:
        options.add_argument(flag)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    # SwiftShader draws a frame in seconds on a busy machine: a screenshot waits for one
    driver.set_page_load_timeout(600)
    driver.set_script_timeout(600)
    driver.command_executor._client_config.timeout = 600
    return driver


def screenshot(driver, tries=20):
    """The page as an (H, W, 3) uint8 array. SwiftShader on a busy machine can keep the
    renderer from answering within chromedriver's 10 s: asked again then."""
    from PIL import Image
    from selenium.common.exceptions import TimeoutException
    for attempt in range(tries):
        try:
            png = driver.get_screenshot_as_png()
            break
        except TimeoutException:
            if attempt == tries - 1:
                raise
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def canvas_size(driver):
    r = driver.execute_script("const c = document.querySelector('canvas'); const r = c.getBoundingClientRect();"
                              "return [r.left, r.top, r.width, r.height];")
    return [int(round(x)) for x in r]


def wait_for(condition, what, timeout=120.0, every=0.2):
    """Poll condition() until it is true; AssertionError naming `what` after `timeout` s (a
    bound against a hang, never a measurement)."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        time.sleep(every)


def button(driver, label):
    """The panel's button whose text is `label`: one query (asking each of the panel's buttons
    for its text is a round trip each, seconds apiece while SwiftShader keeps the page busy)."""
    from selenium.webdriver.common.by import By
    found = driver.find_elements(By.XPATH, f"//button[normalize-space(.)='{label}']")
    return found[0] if found else None


def press(driver, label, timeout=120.0):
    """Click the panel's button `label` as a user would: wait for it, and if something lies over
    it (viser's notices come and go) or it cannot take a click yet (the panel may still be laying
    itself out, its button not yet shown) close the notices and try again; AssertionError naming
    what stopped it after `timeout` s."""
    from selenium.common.exceptions import (ElementClickInterceptedException, ElementNotInteractableException,
                                            StaleElementReferenceException)
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        found = button(driver, label)
        if found is not None:
            try:
                # in the panel's middle: at its edges the dock's resize handles take the click
                driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", found)
                found.click()
                return
            except (ElementClickInterceptedException, ElementNotInteractableException,
                    StaleElementReferenceException) as e:
                last = e.msg.splitlines()[0] if e.msg else type(e).__name__
                dismiss_notifications(driver)
        time.sleep(0.3)
    raise AssertionError(f"waited {timeout:g} s to press {label!r}: {last or 'no such button'}")


def dismiss_notifications(driver):
    """Close viser's 'software WebGL' notice (it covers the scene's top-left corner)."""
    driver.execute_script("document.querySelectorAll('.mantine-Notification-closeButton, "
                          "button.mantine-Notification-closeButton').forEach(b => b.click());")


def play_then_pause(driver, session, sim):
    """Press Play and see the run's time advance, then Pause and see the run paused."""
    press(driver, "Play")
    wait_for(lambda: not session.paused, "Play to resume the run")
    t0 = sim.t
    wait_for(lambda: sim.t > t0 + 0.05, "simulation time to advance")
    wait_for(lambda: button(driver, "Pause"), "the button to read Pause")
    press(driver, "Pause")
    wait_for(lambda: session.paused, "Pause to pause the run")


def push_300_newtons(driver, session):
    """The page's Push with its force's y set to 300 N: the push reaches the run on the WAIST
    (the panel's default link) with that force."""
    from selenium.webdriver.common.by import By
    force = [e for e in driver.find_elements(By.TAG_NAME, "input")
             if e.get_attribute("value") == "100" and e.is_displayed()]
    force[0].clear()
    force[0].send_keys("300\n")
    press(driver, "Push")
    wait_for(lambda: session._wrenches, "the push to reach the session")
    assert session._wrenches[0][1] == "WAIST" and session._wrenches[0][2][1] == 300.0

#!/usr/bin/env python3
"""The dashboard's teaching bar in headless Chromium (tst_web_teaching): against a live teaching
run of the toy job (`shardlab run toy.json --set telemetry.teaching=true --http ...`), the bar must
show, say the run is paused on purpose after the first forward, and its buttons must step the run:
Next phase to the backward, Next step to the update, Run to the end. Reads the page as a person
would (the bar's text and buttons) and its data attributes. Exit 0 all good, 1 a check failed,
2 the browser cannot run here.

  teaching_check.py URL
"""
import sys
import time

from browser_check import start_browser  # exits 2 when selenium or Chromium is missing
from selenium.webdriver.common.by import By


def wait_for(what, predicate, timeout=30):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - the page may be re-rendering
            last = e
        time.sleep(0.1)
    print(f"teaching_check: FAILED: {what} (last seen: {last!r})", file=sys.stderr)
    sys.exit(1)


def main():
    url = sys.argv[1]
    d = start_browser()
    try:
        d.get(url)
        bar = lambda: d.find_element(By.ID, "teaching-bar")  # noqa: E731
        banner = lambda: d.find_element(By.ID, "teaching-banner").text  # noqa: E731
        wait_for("the teaching bar shows, paused after phase 1",
                 lambda: bar().is_displayed() and bar().get_attribute("data-paused") == "true"
                 and bar().get_attribute("data-phases") == "1")
        wait_for("the banner names the first forward",
                 lambda: banner().startswith("Paused on purpose after the forward of step 1"))
        d.find_element(By.ID, "teach-next-phase").click()
        wait_for("Next phase: paused after the backward",
                 lambda: bar().get_attribute("data-phases") == "2"
                 and bar().get_attribute("data-paused") == "true"
                 and "the backward of step 1" in banner())
        d.find_element(By.ID, "teach-next-step").click()
        wait_for("Next step: paused after the update",
                 lambda: bar().get_attribute("data-phases") == "3"
                 and "the update of step 1" in banner())
        d.find_element(By.ID, "teach-run").click()
        wait_for("Run: the bar says the run goes on",
                 lambda: "run chosen by the viewer" in banner())
        print("teaching_check: ok")
    finally:
        d.quit()


if __name__ == "__main__":
    main()

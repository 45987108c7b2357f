"""The review page in headless Chromium, opened from disk: marked pairs download as labels that
``simhash-tune`` reads, and hostile texts and URLs stay inert.

Needs ``/usr/bin/chromium`` and ``/usr/bin/chromedriver`` (Debian's chromium and chromium-driver,
installed by .ci/run): a missing browser fails these tests, as a missing Redis fails the Redis ones.
``SIMHASH_REVIEW_SCREENSHOT=docs/review.png`` also saves the screenshot there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from review_fixtures import FIELDS, HOSTILE_TEXT, HOSTILE_URLS, corpus_review, hostile_page
from scrapy_simhash.extract import extract_text

CHROMIUM = os.environ.get("SIMHASH_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SIMHASH_CHROMEDRIVER", "/usr/bin/chromedriver")
# Flags that keep Chromium off the network (it has none to reach here) and out of any shared profile.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,1500",
)
DOWNLOAD_SECONDS = 30  # an upper bound to wait for the file, never a pause


class Browser:
    """A headless Chromium whose downloads land in ``downloads``."""

    def __init__(self, driver: WebDriver, downloads: Path) -> None:
        self.driver = driver
        self.downloads = downloads

    def open(self, page: Path) -> None:
        self.driver.get(page.as_uri())

    def choose(self, pair: int, label: str) -> None:
        self.driver.find_element(By.CSS_SELECTOR, f'input[name="label-{pair}"][value="{label}"]').click()

    def first_labellable(self) -> int:
        """The number of the page's first pair that can be labelled."""
        return int(self.driver.find_element(By.CSS_SELECTOR, "input.label").get_attribute("data-pair"))

    def text(self, selector: str) -> str:
        return self.driver.find_element(By.CSS_SELECTOR, selector).text

    def download_labels(self) -> list[dict]:
        button = self.driver.find_element(By.ID, "download")
        button.click()
        path = self.downloads / button.get_attribute("data-filename")

        def complete(_: WebDriver) -> bool:
            return path.exists() and not any(self.downloads.glob("*.crdownload"))

        WebDriverWait(self.driver, DOWNLOAD_SECONDS, poll_frequency=0.05).until(complete)
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def errors(self) -> list[dict]:
        """The console's errors (a Content-Security-Policy refusal is one)."""
        return [entry for entry in self.driver.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    if missing:
        pytest.fail(
            f"the review page tests need Chromium and its driver, missing: {', '.join(missing)} "
            "(apt-get install chromium chromium-driver; .ci/run does)"
        )
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        yield Browser(driver, downloads)
    finally:
        driver.quit()


def test_marked_pairs_download_as_labels_that_simhash_tune_reads(corpus: list[dict], browser, tmp_path) -> None:
    made = corpus_review(corpus, tmp_path)
    records = made["records"]
    page = tmp_path / "review.html"
    subprocess.run(
        [sys.executable, "-m", "scrapy", "simhash-review", made["review_log"].name, "--items", made["items"].name,
         "--merge-log", made["merge_log"].name, "-o", page.name],
        check=True, capture_output=True, cwd=tmp_path, timeout=120,
    )
    browser.open(page)
    assert browser.text("#counter") == f"0 of {len(records)} pairs marked"
    assert not browser.driver.find_element(By.ID, "download").is_enabled()

    merged = next(n for n, record in enumerate(records, 1) if record["decision"] == "merged")
    rejected = next(n for n, record in enumerate(records, 1) if record["decision"] == "rejected")
    browser.choose(merged, "duplicate")
    browser.choose(rejected, "distinct")
    assert browser.text("#counter") == f"2 of {len(records)} pairs marked"
    assert "labelled" in browser.driver.find_element(By.ID, f"pair-{merged}").get_attribute("class")
    browser.driver.execute_script("window.scrollTo(0, 0)")
    screenshot = tmp_path / "review.png"
    assert browser.driver.save_screenshot(str(screenshot))
    assert screenshot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get("SIMHASH_REVIEW_SCREENSHOT"):
        shutil.copyfile(screenshot, os.environ["SIMHASH_REVIEW_SCREENSHOT"])
    labels = browser.download_labels()
    assert browser.errors() == []

    texts = {item["url"]: extract_text(item, FIELDS).text for item in map(json.loads, made["items"].open())}
    expected = [(records[n - 1], label) for n, label in sorted({merged: "duplicate", rejected: "distinct"}.items())]
    assert [line["label"] for line in labels] == [label for _, label in expected]
    for line, (record, _) in zip(labels, expected):
        assert line["a"] == {"text": texts[record["matched_url"]], "id": record["matched_id"],
                             "url": record["matched_url"]}
        assert line["b"]["text"] == record["duplicate_text"] and line["b"]["url"] == record["duplicate_url"]

    labelled = browser.downloads / "simhash-labels.jsonl"
    tuned = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "tune", str(labelled)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert tuned.returncode == 0, tuned.stderr
    assert "1 duplicate and 1 distinct pairs" in tuned.stdout
    for name, record in (("duplicate", records[merged - 1]), ("distinct", records[rejected - 1])):
        distance, jaccard = record["distance"], record["jaccard"]  # the pipeline's own figures, recomputed by tune
        assert f"  {name}: distance {distance}..{distance}, Jaccard {jaccard:.3f}..{jaccard:.3f}" in tuned.stdout
    assert "SIMHASH_JACCARD_THRESHOLD = " in tuned.stdout


def test_a_reviewer_pages_through_and_tunes_on_every_pages_labels(corpus: list[dict], browser, tmp_path) -> None:
    made = corpus_review(corpus, tmp_path)
    subprocess.run(
        [sys.executable, "-m", "scrapy", "simhash-review", made["review_log"].name, "--items", made["items"].name,
         "--per-page", "4", "-o", "review.html"],
        check=True, capture_output=True, cwd=tmp_path, timeout=120,
    )
    browser.open(tmp_path / "review.html")
    browser.choose(browser.first_labellable(), "duplicate")
    assert len(browser.download_labels()) == 1
    browser.driver.find_element(By.LINK_TEXT, "next page").click()
    assert browser.driver.current_url.endswith("/review-2.html")
    assert browser.text("#counter").startswith("0 of ")
    on_page_two = browser.first_labellable()
    assert on_page_two > 4
    browser.choose(on_page_two, "distinct")
    assert [line["label"] for line in browser.download_labels()] == ["distinct"]
    browser.driver.find_element(By.LINK_TEXT, "previous page").click()
    assert browser.driver.current_url.endswith("/review.html")
    assert browser.errors() == []
    labels = sorted(browser.downloads.glob("simhash-labels*.jsonl"))
    assert [path.name for path in labels] == ["simhash-labels-2.jsonl", "simhash-labels.jsonl"]
    tuned = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "tune", *map(str, labels)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert tuned.returncode == 0, tuned.stderr
    assert "1 duplicate and 1 distinct pairs" in tuned.stdout


def test_hostile_texts_and_urls_stay_inert_in_the_browser(browser, tmp_path) -> None:
    page = tmp_path / "hostile.html"
    page.write_text(hostile_page(), encoding="utf-8")
    browser.open(page)
    driver = browser.driver
    assert driver.execute_script("return window.pwned") is None
    assert driver.find_elements(By.TAG_NAME, "img") == []
    protocols = {link.get_attribute("protocol") for link in driver.find_elements(By.TAG_NAME, "a")}
    assert protocols == {"https:"}
    shown = browser.text("#pair-1 .side:nth-child(2) .text")
    assert shown.startswith("</script><script>window.pwned = 1</script><img src=x onerror=")
    assert HOSTILE_URLS[0] in browser.text("#pair-1 dl.meta")  # shown as text, not a link

    browser.choose(1, "distinct")
    [line] = browser.download_labels()
    assert line["a"]["text"] == HOSTILE_TEXT and line["b"]["text"] == HOSTILE_TEXT + " 0"
    assert line["b"]["url"] == HOSTILE_URLS[0] and line["label"] == "distinct"
    assert driver.execute_script("return window.pwned") is None

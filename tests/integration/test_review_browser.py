"""The review page in headless Chromium, opened from disk, at 1400 and 400 px: what the example
project's crawl leaves is reviewed as the pipeline compared it, on any screen, labelled with the keys,
kept across a reload, and downloaded as labels that ``simhash-tune`` scores as the crawl did; hostile
texts and URLs stay inert.

Needs ``/usr/bin/chromium`` and ``/usr/bin/chromedriver`` (Debian's chromium and chromium-driver,
installed by .ci/run): a missing browser fails these tests, as a missing Redis fails the Redis ones.
``SIMHASH_REVIEW_SCREENSHOTS=docs`` also saves the screenshots there (review.png, review-400.png).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import numpy as np
import pytest
from scrapy.settings import Settings
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from review_fixtures import FIELDS, HOSTILE_TEXT, HOSTILE_URLS, corpus_review, hostile_page
from scrapy_simhash.commands.review import load_furniture
from scrapy_simhash.extract import extract_text
from scrapy_simhash.fingerprint import Fingerprinter, hashes_without, jaccard_hashes
from scrapy_simhash.mergelog import raw_text, read_merge_log
from scrapy_simhash.offline.review_pairs import (
    Side,
    TextFinder,
    feed_pages,
    item_texts,
    pairs_of,
    read_feed,
    review_texts,
)
from scrapy_simhash.settings import SimhashSettings, read
from scrapy_simhash.whole_text import SAME_TEXT, WholeText, whole_text, whole_text_jaccard

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
    "--window-size=1400,1000",
)
SIDES = ("matched", "duplicate")
DOWNLOAD_SECONDS = 30  # an upper bound to wait for the file, never a pause
WIDE, NARROW = 1400, 400
EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"
# One request at a time, breadth first, and no warm-up ended by the clock: the crawl meets the pages
# in one order on any machine, so it logs the same decisions (which page of a copy comes first
# decides which pairs are compared, and across hosts or within one).
ONE_ORDER = {"CONCURRENT_REQUESTS": 1, "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
             "SIMHASH_BOILERPLATE_WARMUP_TIMEOUT": 3600}
# The example project's crawl with its own settings, its output redirected: stats aside, as run.py does it.
CRAWL = """
import json, sys
from scrapy.crawler import CrawlerProcess
from scrapy.settings import Settings
root, overrides = sys.argv[1], json.loads(sys.argv[2])
settings = Settings()
settings.setmodule("docsproject.settings", priority="project")
settings.update(overrides, priority="cmdline")
process = CrawlerProcess(settings)
process.crawl(process.create_crawler("docs"), root=root)
process.start()
"""


class Browser:
    """A headless Chromium whose downloads land in ``downloads``."""

    def __init__(self, driver: WebDriver, downloads: Path) -> None:
        self.driver = driver
        self.downloads = downloads

    def open(self, page: Path, width: int = WIDE) -> None:
        """``page`` in a viewport ``width`` px wide (Chromium's window cannot be narrower than 500)."""
        metrics = {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        self.driver.get(page.as_uri())

    def keys(self, keys: str) -> None:
        ActionChains(self.driver).send_keys(keys).perform()

    def checked(self) -> dict[int, str]:
        """The label chosen for each pair that has one."""
        return {int(i.get_attribute("data-pair")): i.get_attribute("value")
                for i in self.driver.find_elements(By.CSS_SELECTOR, "input.label:checked")}

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
    shown = browser.text('#pair-1 .text[data-side="b"]')
    assert shown.startswith("</script><script>window.pwned = 1</script><img src=x onerror=")
    assert HOSTILE_URLS[0] in browser.text("#pair-1 dl.meta")  # shown as text, not a link

    browser.choose(1, "distinct")
    [line] = browser.download_labels()
    # Read back from the page (a carriage return too), or from the data where the page cannot hold it (NUL).
    assert line["a"]["text"] == HOSTILE_TEXT and line["b"]["text"] == HOSTILE_TEXT + " 0\x00"
    assert line["b"]["url"] == HOSTILE_URLS[0] and line["label"] == "distinct"
    assert driver.execute_script("return window.pwned") is None


@pytest.fixture(scope="module")
def example_review(tmp_path_factory) -> dict:
    """The example project's crawl (its site, spider and settings; output in a folder of its own), and
    the review page ``simhash-review`` writes of it with the project's settings."""
    folder = tmp_path_factory.mktemp("example")
    spec = importlib.util.spec_from_file_location("example_build_site", EXAMPLE / "build_site.py")
    build_site = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_site)
    build_site.main(["--out", str(folder / "site")])
    output = {
        "SIMHASH_INDEX_URL": f"sqlite:///{folder}/docs.sqlite3",
        "SIMHASH_MERGE_LOG": str(folder / "docs-merges.jsonl"),
        "SIMHASH_REVIEW_LOG": str(folder / "docs-review.jsonl"),
        "FEEDS": {str(folder / "docs-items.jsonl"): {"format": "jsonlines"}},
        "LOG_LEVEL": "WARNING",
        **ONE_ORDER,
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), os.environ.get("PYTHONPATH", "")])}
    crawled = subprocess.run([sys.executable, "-c", CRAWL, str(folder / "site"), json.dumps(output)],
                             cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert crawled.returncode == 0, crawled.stderr[-3000:]
    page = folder / "review" / "review.html"  # a folder that does not exist yet
    reviewed = subprocess.run(
        [sys.executable, "-m", "scrapy", "simhash-review", output["SIMHASH_REVIEW_LOG"],
         "--items", str(folder / "docs-items.jsonl"), "-s", f"SIMHASH_INDEX_URL={output['SIMHASH_INDEX_URL']}",
         "-o", str(page)],
        cwd=EXAMPLE, capture_output=True, text=True, timeout=120,
    )
    assert reviewed.returncode == 0, reviewed.stderr
    records = list(read_merge_log(output["SIMHASH_REVIEW_LOG"]))
    assert reviewed.stdout.startswith(f"{page}: {len(records)} decisions, {len(records)} with both texts\n")
    feed = [json.loads(line) for line in (folder / "docs-items.jsonl").open(encoding="utf-8")]
    config = read(Settings({"SIMHASH_INDEX_URL": output["SIMHASH_INDEX_URL"], "SIMHASH_FIELDS": ["title", "body"],
                            "SIMHASH_HOST_FIELD": "site"}), "docs")
    return {"page": page, "records": records, "feed": {item["url"]: item for item in feed},
            **reviewed_as_compared(config, records, folder / "docs-items.jsonl", folder / "site")}


def reviewed_as_compared(config: SimhashSettings, records: list[dict], items: Path, site: Path) -> dict:
    """The pairs ``simhash-review`` shows, as it finds their texts, and the Jaccard of each scored as
    the pipeline scored it: whole texts for a pair judged on them, else what either host calls
    furniture left out of both."""

    def host(url: str) -> str:  # the spider's "site" field: the site's folder
        return Path(url2pathname(urlsplit(url).path)).relative_to(site).parts[0]

    hosts = {host(record[f"{side}_url"]) for record in records for side in SIDES}
    furniture, problem = load_furniture(config, hosts)
    assert not problem and set(furniture) == hosts  # each learned from a full sample, stored
    finder = TextFinder()
    review_texts(finder, records, "review log")
    pages, _ = feed_pages(read_feed(items), config)
    item_texts(finder, pages, "items", furniture)
    pairs = pairs_of(records, finder, items_given=True)
    fingerprinter = Fingerprinter(width=config.shingle_width, weighting=config.weighting)
    scored = []
    for pair in pairs:
        (a, a_whole), (b, b_whole) = (as_compared(fingerprinter, side) for side in (pair.matched, pair.duplicate))
        if pair.whole:
            scored.append(whole_text_jaccard(a, a_whole, b, b_whole))
            continue
        matched, duplicate = (furniture[host(pair.record[f"{side}_url"])] for side in SIDES)
        left_out = np.union1d(matched.verification, duplicate.verification)
        scored.append(jaccard_hashes(hashes_without(a, left_out), hashes_without(b, left_out)))
    return {"pairs": pairs, "scored": scored}


def test_the_example_crawls_pairs_are_reviewed_with_the_texts_compared(example_review) -> None:
    """Each pair's texts, scored as the pipeline scored them, give the logged Jaccard: the review found
    the very texts compared. The review's own check (and simhash-tune's) scores the texts as they are,
    so a shingle either host calls furniture can move that score past its tolerance."""
    pairs = example_review["pairs"]
    assert all(pair.labellable for pair in pairs)
    assert example_review["scored"] == [pair.record["jaccard"] for pair in pairs]


def as_compared(fingerprinter: Fingerprinter, side: Side) -> tuple[np.ndarray, WholeText]:
    """A page's verification hashes and its whole text's difference, as the index stores them."""
    hashes = fingerprinter.signature(side.text).hashes
    raw = raw_text(side.text, side.furniture)
    return hashes, whole_text(fingerprinter, raw, side.text, hashes) if raw != side.text else SAME_TEXT


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_a_reviewer_works_through_the_example_crawl_on_any_screen(example_review, browser, width, tmp_path) -> None:
    records, driver = example_review["records"], browser.driver
    assert len(records) >= 10 and {r["decision"] for r in records} == {"merged", "rejected"}
    browser.open(example_review["page"], width)
    assert driver.execute_script("return document.documentElement.scrollWidth") <= width  # no sideways scroll
    bars = driver.execute_script(
        "return Array.from(document.querySelectorAll('svg.histogram rect.merged'), function (bar) {"
        " const box = bar.getBoundingClientRect(); return [box.left, box.right, box.height]; })"
    )
    assert len(bars) >= 3 and all(0 <= left and right <= width and height > 0 for left, right, height in bars)
    columns = driver.execute_script(
        "const [a, b] = document.querySelectorAll('#pair-1 .text.compared');"
        " return [a.getBoundingClientRect().top, b.getBoundingClientRect().top, a.getBoundingClientRect().left,"
        " b.getBoundingClientRect().left];"
    )
    if width == WIDE:  # side by side, the two boxes level whatever their headers
        assert columns[0] == columns[1] and columns[2] < columns[3]
    else:  # one above the other
        assert columns[0] < columns[1] and columns[2] == columns[3]

    # The keys: j to the first pair, d and n label it and go on to the next unmarked one.
    browser.keys("jdn")
    assert browser.checked() == {1: "duplicate", 2: "distinct"}
    assert "current" in driver.find_element(By.ID, "pair-3").get_attribute("class")
    browser.keys("kx")  # back to pair 2, label cleared
    assert browser.checked() == {1: "duplicate"}
    rejected = next(n for n, record in enumerate(records, 1)
                    if record["decision"] == "rejected" and not record.get("whole_texts"))
    driver.find_element(By.CSS_SELECTOR, "#filter option[value=rejected]").click()
    assert driver.find_element(By.ID, f"pair-{rejected}").is_displayed()
    assert not [s for s in driver.find_elements(By.CSS_SELECTOR, "section.pair[data-decision=merged]")
                if s.is_displayed() and "current" not in s.get_attribute("class")]
    browser.choose(rejected, "distinct")
    expected = {1: "duplicate", rejected: "distinct"}
    driver.refresh()  # the labels are kept in the browser
    assert browser.checked() == expected
    assert browser.text("#counter") == f"2 of {len(records)} pairs marked"

    # The raw text: the feed's text of the page compared with, its furniture struck out.
    stripped = next(n for n, record in enumerate(records, 1) if not record.get("whole_texts"))
    driver.execute_script("arguments[0].scrollIntoView()", driver.find_element(By.ID, f"pair-{stripped}"))
    browser.keys("r")
    matched = records[stripped - 1]["matched_url"]
    raw = driver.find_element(By.CSS_SELECTOR, f"#pair-{stripped} .raw-view")
    assert raw.get_attribute("textContent") == extract_text(example_review["feed"][matched], ["title", "body"]).text
    assert driver.find_elements(By.CSS_SELECTOR, f"#pair-{stripped} .raw-view s.furniture")
    browser.keys("r")

    driver.execute_script("window.scrollTo(0, 0)")
    screenshot = tmp_path / "review.png"
    assert driver.save_screenshot(str(screenshot))
    if os.environ.get("SIMHASH_REVIEW_SCREENSHOTS"):
        name = "review.png" if width == WIDE else f"review-{width}.png"
        shutil.copyfile(screenshot, Path(os.environ["SIMHASH_REVIEW_SCREENSHOTS"]) / name)
    labels = browser.download_labels()
    assert browser.errors() == []
    assert [line["label"] for line in labels] == [expected[n] for n in sorted(expected)]
    for line, n in zip(labels, sorted(expected)):
        record = records[n - 1]
        assert line["jaccard"] == record["jaccard"]
        if not record.get("whole_texts"):  # the compared texts, as the review log holds the duplicate's
            assert line["b"]["text"] == record["duplicate_text"]
    for n, record in enumerate(records, 1):  # a pair the guard judged whole is shown whole, and says so
        section = driver.find_element(By.ID, f"pair-{n}").get_attribute("textContent")
        assert ("the whole texts: two pages of one host" in section) == bool(record.get("whole_texts"))

    tuned = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "tune", str(browser.downloads / "simhash-labels.jsonl")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert tuned.returncode == 0, tuned.stderr
    assert "1 duplicate and 1 distinct pairs" in tuned.stdout
    count, same = len(expected), sum(example_review["pairs"][n - 1].as_logged for n in expected)
    assert f"{same} of {count} pairs score here the Jaccard the crawl logged for them (within 0.001)" in (
        tuned.stdout)  # as the review page tells them
    for name, n in (("duplicate", 1), ("distinct", rejected)):  # scored as the crawl scored them
        [low, high] = re.search(rf"  {name}: distance \d+\.\.\d+, Jaccard ([\d.]+)\.\.([\d.]+)", tuned.stdout).groups()
        assert float(low) == float(high) == pytest.approx(records[n - 1]["jaccard"], abs=0.0015)

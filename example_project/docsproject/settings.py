"""Settings of the example project: the SimHash pipeline and the boilerplate learner, enabled."""

from pathlib import Path

# Index and merge logs live beside the project (git-ignored), whatever the working directory.
OUTPUT = Path(__file__).resolve().parents[1] / "output"

BOT_NAME = "docsproject"
SPIDER_MODULES = ["docsproject.spiders"]
NEWSPIDER_MODULE = "docsproject.spiders"

# The pipeline, late in ITEM_PIPELINES, with its boilerplate learner (docs/boilerplate.md).
ADDONS = {"scrapy_simhash.Addon": 0}

# The pages are local files (file://): their "site" field names the syndicating site, which is
# what the boilerplate learner keys its sets on when URLs carry no host.
SIMHASH_FIELDS = ["title", "body"]
SIMHASH_HOST_FIELD = "site"

SIMHASH_INDEX_URL = f"sqlite:///{OUTPUT}/{{spider}}.sqlite3"
SIMHASH_MERGE_LOG = f"{OUTPUT}/{{spider}}-merges.jsonl"
SIMHASH_REVIEW_LOG = f"{OUTPUT}/{{spider}}-review.jsonl"

# A dropped copy is one short line at INFO by default: quieter here.
SIMHASH_DROP_LOG_LEVEL = "DEBUG"
LOG_LEVEL = "INFO"
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False  # an offline demo opens no ports
REMOTE_CONTROL_ENABLED = False

# What `scrapy simhash-review` needs (docs/review.md): the kept pages as a feed, whose texts the
# duplicates were compared with, and every decision near the threshold sampled into the review log.
FEEDS = {str(OUTPUT / "%(name)s-items.jsonl"): {"format": "jsonlines", "encoding": "utf8"}}
SIMHASH_REVIEW_RATE = 1.0
SIMHASH_REVIEW_MARGIN = 0.15

"""Crawls the syndicating sites built by ``build_site.py`` from local files: no server, no network."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import scrapy
from scrapy.http import Response

SITE_ROOT = Path(__file__).resolve().parents[2] / "site"


class DocsSpider(scrapy.Spider):
    """Follows every site's index page and yields one item per page.

    The item's ``body`` is the page's whole ``<body>`` as HTML, navigation, sidebar and footer
    included, as a careless extractor would take it: the pipeline converts it to text and the
    boilerplate learner removes each site's furniture.
    """

    name = "docs"

    def __init__(self, root: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.root = Path(root).resolve() if root else SITE_ROOT

    async def start(self) -> Any:
        if not self.root.is_dir():
            raise FileNotFoundError(f"no site at {self.root}: run build_site.py (run.py does it for you)")
        for site in sorted(p for p in self.root.iterdir() if p.is_dir()):
            yield scrapy.Request((site / "index.html").as_uri(), callback=self.parse_index)

    def parse_index(self, response: Response) -> Iterator[scrapy.Request]:
        """A site's front page links all its pages."""
        yield from response.follow_all(css="a", callback=self.parse_page)

    def parse_page(self, response: Response) -> Iterator[dict[str, str]]:
        yield {
            "url": response.url,
            "site": Path(url2pathname(urlsplit(response.url).path)).relative_to(self.root).parts[0],
            "title": response.css("h1::text").get(default=""),
            "body": response.css("body").get(default=""),
        }

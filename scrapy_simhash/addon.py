"""The Scrapy add-on: one ``ADDONS`` entry enables the pipeline, late in ``ITEM_PIPELINES``, with its
boilerplate learner on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.utils.misc import load_object

if TYPE_CHECKING:
    from scrapy.settings import Settings

__all__ = ["Addon"]

PIPELINE = "scrapy_simhash.pipelines.SimhashPipeline"
# Late in the chain: items a validation pipeline drops never become canonicals whose copies would
# then be dropped although the canonical itself was never exported.
PRIORITY = 900


class Addon:
    """``ADDONS = {"scrapy_simhash.Addon": 0}``: the SimHash pipeline and its boilerplate learner.

    A priority the user already gave the pipeline in ``ITEM_PIPELINES`` is kept, and so is a
    ``SIMHASH_BOILERPLATE`` set in the project's or the spider's settings.
    """

    def update_settings(self, settings: Settings) -> None:
        # Loaded, not compared as strings: a project may key the pipeline by its class.
        if not any(load_object(key) is load_object(PIPELINE) for key in settings.getdict("ITEM_PIPELINES")):
            settings["ITEM_PIPELINES"][PIPELINE] = PRIORITY
        settings.set("SIMHASH_BOILERPLATE", True, "addon")

"""The add-on keeps the priority a project already gave the pipeline, however the project named it."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from scrapy_simhash import Addon
from scrapy_simhash.pipelines import SimhashPipeline


class LaterPipeline:
    pass


def pipelines_after_addon(given: dict) -> list[type]:
    settings = Settings({"ITEM_PIPELINES": given})
    Addon().update_settings(settings)
    return [load_object(p) for p in build_component_list(settings.getwithbase("ITEM_PIPELINES"))]


@pytest.mark.parametrize("key", [SimhashPipeline, "scrapy_simhash.pipelines.SimhashPipeline"])
def test_a_pipeline_the_project_placed_stays_where_it_was_placed(key):
    assert pipelines_after_addon({key: 100, LaterPipeline: 200}) == [SimhashPipeline, LaterPipeline]


def test_without_the_pipeline_the_addon_puts_it_last():
    assert pipelines_after_addon({LaterPipeline: 200}) == [LaterPipeline, SimhashPipeline]

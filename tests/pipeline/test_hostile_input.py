"""Hostile items: whatever a field holds, ``process_item`` fingerprints it or counts a skip, never raises.

Driven through the real pipeline (SQLite index in tmp_path: the decision path is the same for every
backend; key building on Redis is covered by the odd-id cases of the index contract tests).
"""

from __future__ import annotations

import dataclasses
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline_harness import feed_judged, open_pipeline, simhash_stats

MAX_CHARS = 100_000

CHINESE_A = (
    "网络爬虫是一种按照一定的规则自动地抓取万维网信息的程序或者脚本。它们被广泛用于互联网搜索引擎或其他类似网站，"
    "可以自动采集所有其能够访问到的页面内容，以获取或更新这些网站的内容和检索方式。从功能上来讲，爬虫一般分为数据采集、"
    "处理、储存三个部分。传统爬虫从一个或若干初始网页的地址开始，获得初始网页上的链接，在抓取网页的过程中，不断从当前页面上"
    "抽取新的地址放入队列，直到满足系统的一定停止条件。"
)
CHINESE_B = (
    "今天的天气非常好，阳光明媚，微风轻拂。公园里有许多人在散步、跑步和放风筝。孩子们在草地上追逐嬉戏，老人们坐在长椅上"
    "聊天下棋。湖面上有几只白色的天鹅悠闲地游来游去，岸边的柳树垂下长长的枝条。远处传来悠扬的音乐声，原来是一群年轻人"
    "在广场上跳舞。这样美好的周末，让人感到无比轻松和愉快，仿佛所有的烦恼都随风而去了。"
)
JAPANESE = (
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所でニャーニャー泣いていた"
    "事だけは記憶している。吾輩はここで始めて人間というものを見た。しかもあとで聞くとそれは書生という人間中で一番獰悪な"
    "種族であったそうだ。この書生というのは時々我々を捕えて煮て食うという話である。しかしその当時は何という考もなかった"
    "から別段恐しいとも思わなかった。ただ彼の掌に載せられてスーと持ち上げられた時何だかフワフワした感じがあったばかり"
    "である。掌の上で少し落ちついて書生の顔を見たのがいわゆる人間というものの見始であろう。"
)
ARABIC = (
    "الزاحف هو برنامج يتصفح الشبكة العالمية بطريقة منهجية ومنظمة وآلية، ويستخدم في محركات البحث لتحديث محتوى المواقع "
    "وفهرسة الصفحات التي يزورها حتى يتمكن المستخدمون من البحث فيها بكفاءة أكبر. تبدأ الزواحف عادة بقائمة من العناوين "
    "تسمى البذور، وكلما زار الزاحف عنوانا حدد جميع الروابط في الصفحة وأضافها إلى قائمة العناوين التي سيزورها لاحقا "
    "وفقا لمجموعة من السياسات التي تحدد ترتيب الزيارة وعمقها وتكرارها. وتواجه الزواحف صعوبات كثيرة، منها الحجم الهائل "
    "للشبكة وسرعة تغير صفحاتها، إذ قد تتغير الصفحة أو تحذف قبل أن يعود إليها الزاحف، ومنها الصفحات المكررة التي تنشرها "
    "مواقع مختلفة بقوالب مختلفة، وهي مشكلة يعالجها كشف النسخ المتقاربة حتى لا تخزن الصفحة نفسها مرات عديدة."
)
LOREM = " ".join(f"word{i % 97} filler{i % 13} text{i % 7}" for i in range(40))

SPECIAL_STRINGS = [
    "",
    " \t\n\r\u3000\u00a0\u200b" * 20,  # pure (Unicode) whitespace
    "<div><script>var x = 1;</script><style>p {}</style></div>" * 30,  # pure markup
    "<!-- a comment only -->",
    "nul\x00bytes\x00inside " * 40,
    "\ud800 lone \udfff surrogates " * 30,
    "<p>markup with a lone \ud800 surrogate</p>" * 30,  # html_text cannot encode it
    "\u202eright-to-left override\u202c " * 30,
    CHINESE_A,
    JAPANESE,
    ARABIC,
    "🕷️" * 300,
    "e\u0301" * 500,  # combining accents
    LOREM,
]
HOSTILE_IDS = [
    "a:b:c", "{harness}", "}{", "simhash:{harness}:d:x", "*?[]^", "with space", "line\nbreak",
    "nul\x00id", "\ud800", "", "x" * 10_000, 12345, b"\xff\xfebytes-id", ["list-id"], {"dict": "id"}, None,
    "u" * 40_000, 10**5000,  # longer than MAX_SCALAR_CHARS; more digits than str(int) writes
]
# Ids stored as they are (a lone surrogate becomes U+FFFD, an oversized id is refused).
STORABLE_IDS = [i for i in HOSTILE_IDS if isinstance(i, str) and 0 < len(i) <= 10_000 and i != "\ud800"]
ENCODINGS = ["utf-8", "utf-16", "latin-1", "cp1252", "shift_jis", "koi8-r", "gb18030"]

text_with_surrogates = st.text(st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)))
encoded_text = st.tuples(st.text(max_size=200), st.sampled_from(ENCODINGS)).map(
    lambda pair: pair[0].encode(pair[1], errors="replace")
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    text_with_surrogates,
    st.binary(max_size=300),
    encoded_text,
    st.sampled_from(SPECIAL_STRINGS),
    st.builds(lambda: 10**5000),  # built, not st.just(): its repr is too long for str(int)
    st.builds(lambda: np.arange(3)),  # no truth value: `value in (None, "")` raises
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
items = st.fixed_dictionaries(
    {"url": st.one_of(st.sampled_from(HOSTILE_IDS), values), "title": values, "body_text": values},
    optional={"description": values},
)


@dataclasses.dataclass
class Page:
    url: object
    title: object
    body_text: object


def hostile_settings(tmp_path, **index) -> dict:
    return {
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db",
        "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        "SIMHASH_MAX_CHARS": MAX_CHARS,
        "SIMHASH_FIELDS": ["title", "description", "body_text"],
        **index,
    }


@pytest.fixture
async def pipeline(tmp_path):
    opened = await open_pipeline(hostile_settings(tmp_path))
    yield opened
    await opened.close_spider()


@pytest.fixture(params=["sqlite", "redis"])
async def any_backend_pipeline(request, tmp_path):
    """The pipeline on each backend: on Redis the id becomes part of a key and of script arguments."""
    index = {}
    if request.param == "redis":
        index["SIMHASH_INDEX_URL"] = request.getfixturevalue("redis_server_url")
        index["SIMHASH_KEY_PREFIX"] = request.getfixturevalue("redis_prefix") + ":{spider}"
    opened = await open_pipeline(hostile_settings(tmp_path, **index))
    yield opened
    await opened.close_spider()


@pytest.fixture
async def learning_pipeline(tmp_path):
    """With the furniture learner on, as the add-on has it; a host's warm-up ends at once."""
    opened = await open_pipeline(
        hostile_settings(tmp_path, SIMHASH_BOILERPLATE=True, SIMHASH_BOILERPLATE_WARMUP_TIMEOUT=0.0)
    )
    yield opened
    await opened.close_spider()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(item=items)
async def test_any_item_is_fingerprinted_or_counted(pipeline, item) -> None:
    await feed_judged(pipeline, item)
    assert simhash_stats(pipeline)["simhash/internal_errors"] == 0


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(item=items)
@example(item={"url": "https://a.example/", "body_text": "ASCII but for soft hy\u00adphens\nand lines " * 30})
async def test_any_item_is_stripped_and_fingerprinted_or_counted(learning_pipeline, item) -> None:
    await feed_judged(learning_pipeline, item)
    assert simhash_stats(learning_pipeline)["simhash/internal_errors"] == 0


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(url=st.sampled_from(HOSTILE_IDS), body=st.sampled_from(SPECIAL_STRINGS))
async def test_dataclass_items_too(pipeline, url, body) -> None:
    await feed_judged(pipeline, Page(url=url, title="t", body_text=body))


@pytest.mark.parametrize("item_id", STORABLE_IDS)
async def test_odd_ids_round_trip_as_the_canonical_of_their_duplicate(any_backend_pipeline, item_id) -> None:
    """An id that could break key or member parsing is still the id a later duplicate is merged into."""
    pipeline = any_backend_pipeline
    assert await feed_judged(pipeline, {"url": item_id, "body_text": LOREM})
    duplicate = {"url": "https://elsewhere.example/copy", "body_text": LOREM, "title": ""}
    assert not await feed_judged(pipeline, duplicate)
    [record] = [r for r in await pipeline.index.index.records(item_id) if r.canonical]
    assert record.id == item_id


@pytest.mark.parametrize("url", ["u" * 40_000, 10**5000], ids=["40k-characters", "5001-digits"])
async def test_an_id_too_long_to_store_is_a_counted_skip(pipeline, url, tmp_path) -> None:
    """Ids and URLs go whole into keys and merge-log records: an oversized one is refused, not stored."""
    assert await feed_judged(pipeline, {"url": url, "body_text": LOREM})
    stats = simhash_stats(pipeline)
    assert stats["simhash/unchecked"] == 1 and stats["simhash/bad_fields"] == 1
    assert await pipeline.index.index.count() == 0


@pytest.mark.parametrize(
    ("original", "replacement", "unrelated"),
    [(CHINESE_A, "的", CHINESE_B), (JAPANESE, "の", CHINESE_A), (ARABIC, "ب", CHINESE_B)],
    ids=["chinese", "japanese", "arabic"],
)
async def test_near_duplicates_in_unspaced_and_rtl_scripts_are_found(pipeline, original, replacement, unrelated):
    """A one-character edit of a CJK page is a duplicate; without per-character shingles for unsegmented
    scripts a whole sentence is one ``\\w+`` token, and one edited character hides the page."""
    middle = len(original) // 2 + (original[len(original) // 2] == replacement)
    edited = original[:middle] + replacement + original[middle + 1 :]
    assert await feed_judged(pipeline, {"url": "https://a.example/1", "body_text": original})
    assert not await feed_judged(pipeline, {"url": "https://b.example/1", "body_text": edited})
    assert await feed_judged(pipeline, {"url": "https://c.example/1", "body_text": unrelated})
    assert simhash_stats(pipeline)["simhash/fingerprinted"] == 3


@pytest.mark.parametrize("markup", [False, True], ids=["text", "html"])
async def test_a_20_mb_field_costs_what_max_chars_allows(pipeline, markup) -> None:
    """Only the first SIMHASH_MAX_CHARS characters count: the same prefix alone is an exact duplicate,
    and the traced peak memory stays a small multiple of that prefix, not of the 20 MB."""
    words = [f"w{i % 5000}x{i % 7}" for i in range(2_500_000)]
    body = " ".join(words)[: 20 * 2**20]
    if markup:
        body = "<html><body><p>" + body + "</p></body></html>"
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        assert await feed_judged(pipeline, {"url": "https://big.example/", "body_text": body})
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert simhash_stats(pipeline)["simhash/truncated"] == 1
    assert peak < 100 * MAX_CHARS, f"peak {peak / 2**20:.1f} MiB for a {MAX_CHARS}-character budget"
    prefix = body[:MAX_CHARS] if not markup else " ".join(words)[: MAX_CHARS]
    assert not await feed_judged(pipeline, {"url": "https://small.example/", "body_text": prefix})

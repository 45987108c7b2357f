"""What the command-line entry points say: ``python -m scrapy_simhash``, help texts, and the messages
of ``simhash-eval`` when a corpus gives it nothing to measure."""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from scrapy_simhash.calibration import layout_for
from scrapy_simhash.index import open_index
from scrapy_simhash.minhash import Layout
from scrapy_simhash.offline.evaluate import Configuration, ItemRun, PairRow, Scores, format_item_runs, format_pair_rows
from scrapy_simhash.settings import DEFAULTS


def run(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_python_m_help_lists_every_command_and_exits_0(tmp_path) -> None:
    done = run("-m", "scrapy_simhash", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ours = {p.name for p in entry_points(group="scrapy.commands") if p.value.startswith("scrapy_simhash.")}
    assert {"simhash-eval", "simhash-tune", "simhash-reevaluate", "simhash-review"} <= ours
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")}
    assert listed == {name.removeprefix("simhash-") for name in ours}
    assert "Measure the index's recall and precision" in done.stdout  # each with its description


def test_python_m_without_a_known_command_lists_them_and_exits_2(tmp_path) -> None:
    done = run("-m", "scrapy_simhash", "nosuch", cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown command 'nosuch'" in done.stderr and "  tune " in done.stderr


def test_python_m_command_help_names_the_command_that_runs(tmp_path) -> None:
    done = run("-m", "scrapy_simhash", "eval", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "scrapy simhash-eval [options] CORPUS.jsonl" in done.stdout
    assert "scrapy eval" not in done.stdout


def test_python_m_command_errors_name_the_command(tmp_path) -> None:
    done = run("-m", "scrapy_simhash", "boilerplate", "example.com", "--spider", "nosuch", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith("scrapy simhash-boilerplate: error: no index at")


def test_eval_help_shows_what_a_corpus_line_looks_like(tmp_path) -> None:
    done = run("-m", "scrapy", "simhash-eval", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    example = next(line.strip() for line in done.stdout.splitlines() if line.strip().startswith('{"id"'))
    assert set(json.loads(example)) == {"id", "url", "title", "body_text"}  # a whole, valid line
    assert "SIMHASH_FIELDS" in done.stdout and "title, description, body_text" in done.stdout


def test_tune_help_shows_what_a_labelled_line_looks_like(tmp_path) -> None:
    done = run("-m", "scrapy", "simhash-tune", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    examples = [json.loads(line) for line in done.stdout.splitlines() if line.strip().startswith('{"a"')]
    assert [example["label"] for example in examples] == ["duplicate", "distinct"]


def test_eval_on_a_corpus_without_the_configured_fields_says_so(tmp_path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    lines = [{"id": "a", "url": "https://a", "text": "some words"}, {"id": "b", "url": "https://b", "content": "x"}]
    corpus.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = run("-m", "scrapy", "simhash-eval", str(corpus), cwd=tmp_path)
    assert done.returncode == 2
    assert "none of its 2 documents has text in the fields SIMHASH_FIELDS names (title, description, body_text)" in (
        done.stderr
    )
    assert "id (2), url (2), text (1), content (1)" in done.stderr
    assert "recall" not in done.stdout


def test_eval_reads_the_gzipped_corpus_the_example_ships(tmp_path) -> None:
    corpus = tmp_path / "corpus.jsonl.gz"
    lines = [{"id": str(n), "body_text": " ".join(f"doc{n % 2}word{i}" for i in range(60))} for n in range(4)]
    corpus.write_bytes(gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode()))
    done = run("-m", "scrapy", "simhash-eval", str(corpus), "--orders", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 documents" in done.stdout and "2 pairs with Jaccard" in done.stdout


def test_eval_on_a_file_that_is_not_utf8_says_so(tmp_path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes('{"id": "a", "body_text": "caf\u00e9"}\n'.encode("latin-1"))
    done = run("-m", "scrapy", "simhash-eval", str(corpus), cwd=tmp_path)
    assert done.returncode == 2
    assert f"cannot read {corpus}: not UTF-8 text" in done.stderr and "Traceback" not in done.stderr


def test_eval_tables_print_no_recall_when_there_is_nothing_to_find() -> None:
    configuration = Configuration("16x6>=0.72", Layout(16, 6, 0.72))
    nothing, some = Scores(0, 0, 0), Scores(1, 0, 1)
    table = format_pair_rows([PairRow(configuration, t, pairs, scores, 1.0, 0.0, 0.1) for t, pairs, scores in (
        (0.8, 0, nothing), (0.9, 2, some))])
    recall = [line.split()[4] for line in table.splitlines()[1:]]
    assert recall == ["-", "0.500"]
    runs = format_item_runs([ItemRun(configuration, "corpus", 0.82, set(), 0, 2, 0, nothing)])
    assert runs.splitlines()[1].split()[5] == "-"


def test_eval_counts_documents_without_text_and_prints_no_recall_without_pairs(tmp_path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    lines = [{"id": str(n), "body_text": " ".join(f"doc{n}word{i}" for i in range(60))} for n in range(2)]
    corpus.write_text("".join(json.dumps(line) + "\n" for line in [*lines, {"id": "empty"}]))
    done = run("-m", "scrapy", "simhash-eval", str(corpus), "--orders", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 of 3 documents have no text in the fields SIMHASH_FIELDS names" in done.stdout
    pairs, items = done.stdout.split("The pipeline's decisions")
    default = layout_for(DEFAULTS["SIMHASH_JACCARD_THRESHOLD"], DEFAULTS["SIMHASH_TARGET_RECALL"]).label
    assert {line.split()[4] for line in pairs.splitlines() if line.startswith(default)} == {"-"}
    assert {line.split()[5] for line in items.splitlines() if line.startswith(default)} == {"-"}


def test_eval_names_a_field_the_user_named_that_no_document_has(tmp_path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    words = [" ".join(f"w{n}x{i}" for i in range(60)) for n in range(2)]
    lines = [{"id": str(n), "title": f"Page {n}", "body_text": text} for n, text in enumerate(words)]
    corpus.write_text("".join(json.dumps(line) + "\n" for line in lines))
    named = run("-m", "scrapy", "simhash-eval", str(corpus), "--orders", "0", "-s", "SIMHASH_FIELDS=title,body",
                cwd=tmp_path)
    assert named.returncode == 0, named.stderr
    assert "No document has body, which SIMHASH_FIELDS names: the text measured is that of title alone" in (
        named.stdout
    )
    assert "body_text (2)" in named.stdout
    default = run("-m", "scrapy", "simhash-eval", str(corpus), "--orders", "0", cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    assert "No document has" not in default.stdout  # the default list names fields a corpus may lack


def test_a_read_command_never_creates_an_index(tmp_path) -> None:
    done = run("-m", "scrapy", "simhash-boilerplate", "example.com", "--spider", "nosuch", cwd=tmp_path)
    assert done.returncode == 2 and "no index at sqlite:///" in done.stderr
    assert not list(tmp_path.rglob("*.sqlite3"))
    erased = run("-m", "scrapy", "simhash-erase", "https://example.com/", "--spider", "nosuch", cwd=tmp_path)
    assert erased.returncode == 2 and "no index at" in erased.stderr
    assert not list(tmp_path.rglob("*.sqlite3"))


def test_boilerplate_without_spider_suggests_it(tmp_path):
    done = run("-m", "scrapy", "simhash-boilerplate", "example.org", cwd=tmp_path)
    assert done.returncode == 2
    assert "no index at" in done.stderr and "--spider NAME" in done.stderr


def test_boilerplate_names_a_sqlite_index_without_a_redis_prefix(tmp_path):
    index = tmp_path / "docs.sqlite3"
    asyncio.run(_empty_index(f"sqlite:///{index}"))
    done = run("-m", "scrapy", "simhash-boilerplate", "example.org", "--spider", "docs",
               "-s", f"SIMHASH_INDEX_URL=sqlite:///{index}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"example.org: no furniture in sqlite:///{index}"


@pytest.mark.parametrize("page, said", [
    ("https://nowhere.example/x", "https://nowhere.example/x"),
    ("page\n\x1b[2J1", "page\\n\\x1b[2J1"),  # an id's control characters escaped, never written raw
])
def test_erasing_an_unknown_page_says_so_and_fails(tmp_path, page, said):
    index = tmp_path / "docs.sqlite3"
    asyncio.run(_empty_index(f"sqlite:///{index}"))
    done = run("-m", "scrapy", "simhash-erase", page, "--spider", "docs",
               "-s", f"SIMHASH_INDEX_URL=sqlite:///{index}", "-s", f"SIMHASH_MERGE_LOG={tmp_path}/m.jsonl",
               "-s", "SIMHASH_REVIEW_LOG=", cwd=tmp_path)
    assert done.returncode == 1
    assert f"{said}: no record in index" in done.stderr and "nothing erased" in done.stderr
    assert "\x1b" not in done.stderr


async def _empty_index(url: str) -> None:
    index = open_index(url, layout=layout_for(DEFAULTS["SIMHASH_JACCARD_THRESHOLD"], DEFAULTS["SIMHASH_TARGET_RECALL"]))
    await index.open()
    await index.close()

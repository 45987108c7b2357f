"""Every SIMHASH_* default lives in scrapy_simhash.settings and the README table says the same."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from scrapy_simhash.settings import DEFAULTS

README = Path(__file__).resolve().parents[1] / "README.md"


def documented() -> dict[str, object]:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Settings") : text.index("<!-- section: settings")]
    rows = re.findall(r"^\| `(SIMHASH_[A-Z_]+)` \| `([^`]*)` \|", table, re.MULTILINE)
    return {name: ast.literal_eval(default) for name, default in rows}


def test_the_readme_documents_every_setting_with_its_default() -> None:
    assert documented() == DEFAULTS

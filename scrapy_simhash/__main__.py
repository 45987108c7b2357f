"""``python -m scrapy_simhash eval|tune|reevaluate ...``: the Scrapy commands without the ``scrapy`` launcher."""

from __future__ import annotations

import pkgutil
import sys

from scrapy.cmdline import execute
from scrapy.utils.project import get_project_settings

from scrapy_simhash import commands


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    names = sorted(module.name for module in pkgutil.iter_modules(commands.__path__))
    if not argv or argv[0] not in names:
        sys.stderr.write(f"usage: python -m scrapy_simhash {{{','.join(names)}}} [options] ... (-h for help)\n")
        sys.exit(2)
    settings = get_project_settings()
    # Commands are named after their modules here; the entry points name them simhash-<module>.
    settings.set("COMMANDS_MODULE", "scrapy_simhash.commands", priority="cmdline")
    execute(["scrapy", *argv], settings)


if __name__ == "__main__":
    main()

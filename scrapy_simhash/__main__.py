"""``python -m scrapy_simhash COMMAND ...``: scrapy-simhash's Scrapy commands without the ``scrapy`` launcher.

``python -m scrapy_simhash eval`` runs ``scrapy simhash-eval``; ``-h`` lists the commands.
"""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points
from typing import TextIO

from scrapy.cmdline import execute
from scrapy.utils.project import get_project_settings

# The commands are the package's "scrapy.commands" entry points, all named simhash-<name>.
PREFIX = "simhash-"
USAGE = "usage: python -m scrapy_simhash COMMAND [options] [args]"


def commands() -> dict[str, EntryPoint]:
    """The package's Scrapy commands by short name (``eval`` for ``simhash-eval``)."""
    return {
        point.name.removeprefix(PREFIX): point
        for point in entry_points(group="scrapy.commands")
        if point.name.startswith(PREFIX) and point.value.startswith(f"{__package__}.")
    }


def print_commands(found: dict[str, EntryPoint], out: TextIO) -> None:
    width = max(map(len, found), default=0)
    out.write(f"{USAGE}\n\nCommands (each is also `scrapy {PREFIX}COMMAND`):\n")
    for name, point in sorted(found.items()):
        out.write(f"  {name:<{width}}  {point.load()().short_desc()}\n")
    out.write("\n`python -m scrapy_simhash COMMAND -h` shows a command's options and arguments.\n")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    found = commands()
    if not found:
        sys.stderr.write(
            f"{USAGE}\nno command found: scrapy-simhash registers its commands as Scrapy entry points, "
            "so it must be installed (pip install -e .)\n"
        )
        sys.exit(2)
    if argv[:1] in (["-h"], ["--help"]):
        print_commands(found, sys.stdout)
        sys.exit(0)
    if not argv or argv[0] not in found:
        if argv:
            sys.stderr.write(f"unknown command {argv[0]!r}\n")
        print_commands(found, sys.stderr)
        sys.exit(2)
    sys.argv[0] = f"scrapy {PREFIX}{argv[0]}"  # what Scrapy's parser calls itself in its errors
    execute(["scrapy", f"{PREFIX}{argv[0]}", *argv[1:]], get_project_settings())


if __name__ == "__main__":
    main()

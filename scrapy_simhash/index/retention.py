"""Retention classes -> time to live, shared by every backend.

A group is kept ``ttl`` seconds after it was last written (created or joined); ``None`` keeps it for good.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

__all__ = ["DEFAULT_RETENTION", "Retention"]

DEFAULT_RETENTION: dict[str, float | None] = {"default": None}


class Retention:
    def __init__(
        self, classes: Mapping[str, float | None] | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.classes = dict(DEFAULT_RETENTION if classes is None else classes)
        for name, ttl in self.classes.items():
            if ttl is not None and not ttl > 0:
                raise ValueError(f"retention class {name!r}: TTL must be a positive number of seconds or None")
        self.clock = clock

    def ttl(self, retention: str) -> float | None:
        """Seconds a group of class ``retention`` is kept after its last write; ValueError for an unknown class."""
        try:
            return self.classes[retention]
        except KeyError:
            raise ValueError(
                f"unknown retention class {retention!r}; SIMHASH_RETENTION defines {sorted(self.classes)}"
            ) from None

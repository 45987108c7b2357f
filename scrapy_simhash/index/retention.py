"""Retention classes -> expiry times, shared by every backend.

A record is kept ``ttl`` seconds after it was last written (added or merged); ``None`` keeps it for good.
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

    def expiry(self, retention: str) -> float | None:
        """When a record of class ``retention`` written now expires; ValueError for an unknown class."""
        try:
            ttl = self.classes[retention]
        except KeyError:
            raise ValueError(
                f"unknown retention class {retention!r}; SIMHASH_RETENTION defines {sorted(self.classes)}"
            ) from None
        return None if ttl is None else self.clock() + ttl

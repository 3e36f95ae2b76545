"""Write filters: refuse note text that holds a saved password, a private key or an access token.

A filter takes ``(path, text)`` and returns a reason to refuse, or ``None``. The default chain is
the secret detector (:mod:`gitmem.rules.secrets`), with the rules ``GITMEM_SECRETS_ALLOW`` names turned
off. Deployments extend the chain (e.g. to block their own identifier patterns) with
``GITMEM_FILTERS``: a comma-separated list of ``module:callable`` names, each returning a filter.
Every write path (the store policy, the pre-receive hook) uses the chain :func:`load_filters` builds
from those two settings where the program starts.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gitmem.errors import SecretRefused
from gitmem.rules.secrets import SecretDetector, detector_for

log = logging.getLogger(__name__)

ContentFilter = Callable[[str, str], "str | None"]


def regex_filter(reason: str, *patterns: str, flags: int = 0) -> ContentFilter:
    compiled = [re.compile(p, flags) for p in patterns]

    def check(path: str, text: str) -> str | None:
        return reason if any(c.search(text) for c in compiled) else None

    check.__name__ = f"regex_filter({reason})"
    return check


# The one secret detector (gitmem.rules.secrets) is the default filter everywhere content is written.
DEFAULT_FILTERS: tuple[ContentFilter, ...] = (SecretDetector(),)


@dataclass(frozen=True)
class FilterChain:
    filters: Sequence[ContentFilter] = DEFAULT_FILTERS

    def check(self, path: str, text: str) -> None:
        """Raise :class:`SecretRefused` naming what was found (never echoing the secret)."""
        for content_filter in self.filters:
            reason = content_filter(path, text)
            if reason:
                raise SecretRefused(f"the content of {path} appears to hold {reason}; it was not saved")

    def extended(self, extra: Iterable[ContentFilter]) -> FilterChain:
        return FilterChain((*self.filters, *extra))


def load_filters(spec: str = "", allow: str = "") -> FilterChain:
    """The secret detector less the rules ``allow`` names (``GITMEM_SECRETS_ALLOW``), plus the filters
    ``spec`` names (``GITMEM_FILTERS``: ``module:factory``, comma-separated)."""
    extra: list[ContentFilter] = []
    for name in filter(None, (s.strip() for s in spec.split(","))):
        module_name, _, attr = name.partition(":")
        factory = getattr(importlib.import_module(module_name), attr)
        extra.append(factory())
        log.info("content filter %s loaded", name)
    return FilterChain((detector_for(allow), *extra))

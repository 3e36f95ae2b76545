"""Write filters: refuse note text that holds a saved password, a private key or an access token.

A filter takes ``(path, text)`` and returns a reason to refuse, or ``None``. The default chain is
the secret detector (:mod:`gitmem.rules.secrets`), with the rules ``GITMEM_SECRETS_ALLOW`` names turned
off. Deployments extend the chain (e.g. to block their own identifier patterns) with
``GITMEM_FILTERS``: a comma-separated list of ``module:callable`` names, each returning a filter.
Every write path (the store policy, the pre-receive hook) uses the chain :func:`load_filters` builds
from those two settings where the program starts.

The chain reads every text a caller can store, not only note bodies: :meth:`FilterChain.check_caller_text`
is the one check, called for a note's body and path, a pushed commit's message and identities, a
store's name, description and metadata, a worker's or profile's name, a task's and a dream's
instructions and a task event's payload. A filter sees ``(what, text)``: for a body, its note's path.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gitmem.errors import SecretRefused
from gitmem.rules.secrets import SecretDetector, detector_for

log = logging.getLogger(__name__)

ContentFilter = Callable[[str, str], "str | None"]


def regex_filter(reason: str, *patterns: str, flags: int = 0) -> ContentFilter:
    compiled = [re.compile(p, flags) for p in patterns]

    def check(path: str, text: str) -> str | None:  # noqa: ARG001  the ContentFilter signature
        return reason if any(c.search(text) for c in compiled) else None

    check.__name__ = f"regex_filter({reason})"
    return check


# The one secret detector (gitmem.rules.secrets) is the default filter everywhere content is written.
DEFAULT_FILTERS: tuple[ContentFilter, ...] = (SecretDetector(),)


@dataclass(frozen=True)
class FilterChain:
    filters: Sequence[ContentFilter] = DEFAULT_FILTERS

    def check(self, path: str, text: str) -> None:
        """Raise :class:`SecretRefused` naming what was found in a note's body (never echoing the secret)."""
        self.check_caller_text(f"the content of {path}", text, path=path)

    def check_caller_text(self, what: str, value: object, *, path: str | None = None) -> None:
        """Refuse a caller's text: ``value`` is a string, or a JSON-like value whose every string (keys
        too) is read; ``what`` names the field in the refusal (never the text: it holds the secret).
        The filters are given ``path`` (a note's, for its body) or else ``what``."""
        for text in _strings(value):
            for content_filter in self.filters:
                reason = content_filter(what if path is None else path, text)
                if reason:
                    raise SecretRefused(f"{what} appears to hold {reason}; it was not saved")

    def extended(self, extra: Iterable[ContentFilter]) -> FilterChain:
        return FilterChain((*self.filters, *extra))


def _strings(value: object) -> Iterator[str]:
    # A structure is read as its JSON (so that a key names its value: {"password": "..."}) and each of
    # its strings alone (so that JSON's escapes hide nothing: a key's lines written as "\\n").
    if isinstance(value, str):
        yield value
        return
    if isinstance(value, Mapping | list | tuple):
        yield json.dumps(value, ensure_ascii=False, default=str)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


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

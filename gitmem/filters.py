"""Write filters: refuse note text that holds a saved password, a private key or an access token.

A filter takes ``(path, text)`` and returns a reason to refuse, or ``None``. Deployments extend the
chain (seed 003's enterprise example blocks identifier patterns) with ``GITMEM_FILTERS``: a
comma-separated list of ``module:callable`` names, each returning a filter.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gitmem.errors import SecretRefused
from gitmem.settings import load_settings

log = logging.getLogger(__name__)

ContentFilter = Callable[[str, str], "str | None"]


def regex_filter(reason: str, *patterns: str, flags: int = 0) -> ContentFilter:
    compiled = [re.compile(p, flags) for p in patterns]

    def check(path: str, text: str) -> str | None:
        return reason if any(c.search(text) for c in compiled) else None

    check.__name__ = f"regex_filter({reason})"
    return check


PRIVATE_KEYS = regex_filter(
    "a private key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", r"PuTTY-User-Key-File-\d"
)
ACCESS_TOKENS = regex_filter(
    "an access token",
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",  # GitHub
    r"\bgithub_pat_[A-Za-z0-9_]{60,}\b",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b",  # Slack
    r"\bsk-ant-[A-Za-z0-9_-]{20,}\b",  # Anthropic
    r"\bsk-(?:proj-)?[A-Za-z0-9_-]{32,}\b",  # OpenAI-style
    r"\bAIza[0-9A-Za-z_-]{35}\b",  # Google API key
    r"\bglpat-[A-Za-z0-9_-]{20,}\b",  # GitLab
    r"\b(?:sk|rk)_live_[A-Za-z0-9]{20,}\b",  # Stripe
    r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",  # JWT
    r"\bgm_(?:key|usr|tsk)_[A-Za-z0-9_-]{20,}\b",  # gitmem's own secrets
)
SAVED_PASSWORDS = regex_filter(
    "a saved password",
    # "password: hunter2", "passwd = 's3cret'", "db_password=...": a key naming a password with a value
    # (not \b before the key: in DB_PASSWORD the underscore is a word character).
    r"(?i)(?<![a-z0-9])(?:pass(?:word|wd|phrase)?|pwd|secret[_-]?key|client[_-]?secret)\b[\"']?\s*[:=]\s*[\"']?[^\s\"'<>]{4,}",
    r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s@/]{3,}@",  # credentials inside a URL
)

DEFAULT_FILTERS: tuple[ContentFilter, ...] = (PRIVATE_KEYS, ACCESS_TOKENS, SAVED_PASSWORDS)


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


def load_filters(spec: str | None = None) -> FilterChain:
    """The default chain plus whatever ``GITMEM_FILTERS`` names."""
    spec = load_settings().FILTERS if spec is None else spec
    extra: list[ContentFilter] = []
    for name in filter(None, (s.strip() for s in spec.split(","))):
        module_name, _, attr = name.partition(":")
        factory = getattr(importlib.import_module(module_name), attr)
        extra.append(factory())
        log.info("content filter %s loaded", name)
    return FilterChain().extended(extra)

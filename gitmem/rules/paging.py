"""How many items one page of a listing may hold: the one check every listing's ``limit`` passes."""

from __future__ import annotations

from gitmem.errors import InvalidRequest

MAX_FULL_PAGE = 20  # items of a page that carry their whole content (view=full)


def check_limit(limit: int, maximum: int, *, full: bool = False) -> int:
    """``limit`` if it is a whole number from 1 to ``maximum`` (to :data:`MAX_FULL_PAGE` with ``full``);
    else :class:`InvalidRequest` naming the bounds."""
    cap = min(maximum, MAX_FULL_PAGE) if full else maximum
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= cap:
        view = " with view=full" if full else ""
        raise InvalidRequest(f"limit must be between 1 and {cap}{view}")
    return limit

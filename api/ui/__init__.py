"""The web view at ``/ui/``: server-rendered pages over the engine for people (no script, nothing
fetched from elsewhere, so it works on an air-gapped server). create_app mounts ``router`` and
``account_router``: the pages (:mod:`.pages`), the account page (:mod:`.account`), their sign-in,
error pages and CSRF (:mod:`.session`) and what templates need (:mod:`.render`).
"""

from gitmem.api.ui import account, pages

router = pages.router
account_router = account.router

__all__ = ["account_router", "router"]

"""The settings turned into what the library takes: the one place that reads ``GITMEM_*`` values and
gives the home, the push hooks and the dream runner their options as typed values.

A program reads its settings where it starts (the CLI, the app factory, the hooks) and asks here for
what it needs, handing over the settings as :data:`gitmem.config.values.Values`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.config.values import Values
from gitmem.crypto.master_key import MasterKeySource
from gitmem.rules.filters import FilterChain, load_filters

if TYPE_CHECKING:
    from gitmem.agents.dreams.dreamers import Dreamer
    from gitmem.crypto.signing_key import HomeSigner, SigningKeySource
    from gitmem.engine.gitmem import Gitmem
    from gitmem.engine.push.receive import PushOptions


def home_path(values: Values) -> Path:
    """``GITMEM_HOME``, else ``$XDG_DATA_HOME/gitmem``."""
    configured = values("HOME")
    if configured:
        return Path(configured)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "gitmem"


def master_key(values: Values) -> MasterKeySource:
    key_file = values("MASTER_KEY_FILE")
    return MasterKeySource(text=values("MASTER_KEY") or None, file=Path(key_file) if key_file else None)


def signing_key(values: Values) -> SigningKeySource:
    from gitmem.crypto.signing_key import SigningKeySource  # not for a push hook that signs nothing

    key_file = values("SIGNING_KEY_FILE")
    return SigningKeySource(text=values("SIGNING_KEY") or None, file=Path(key_file) if key_file else None)


def home_signer(values: Values, home: Path) -> HomeSigner:
    """The key that signs the home's commits (a push's record, in post-receive)."""
    from gitmem.crypto.signing_key import HomeSigner

    return HomeSigner(home, signing_key(values))


def filters(values: Values) -> FilterChain:
    return load_filters(values("FILTERS") or "", values("SECRETS_ALLOW") or "")


def open_home(values: Values, home: Path | None = None) -> Gitmem:
    """The home the settings name (or ``home``), opened with their options, its changes told to the
    webhooks' outbox."""
    from gitmem.engine.gitmem import Gitmem  # not for a push hook that never opens the home
    from gitmem.webhooks.outbox import webhooks_for

    gm = Gitmem.open(
        home if home is not None else home_path(values),
        database=values("DATABASE") or None,
        fsync=values("FSYNC"),
        master_key=master_key(values),
        filters=filters(values),
        search_budget=float(values("SEARCH_BUDGET")),
        signing_key=signing_key(values),
    )
    gm.listen(webhooks_for(gm))
    return gm


def push_options(values: Values) -> PushOptions:
    """What the push hooks take: the index's database, the rules of a write, and the home to open."""
    from gitmem.engine.push.receive import PushOptions

    return PushOptions(
        database_url=values("DATABASE") or None,
        filters=filters(values),
        open_home=lambda home: open_home(values, home),
        signer=lambda home: home_signer(values, home),
    )


def dreamer(values: Values) -> Dreamer:
    """``GITMEM_DREAMER``: ``offline`` (default), ``anthropic`` (the SDK, configured from its own
    environment: ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``) or ``offline-hold`` (for tests, holding
    each dream ``GITMEM_DREAM_HOLD`` seconds)."""
    from gitmem.agents.dreams.dreamers import HoldingTidier, ModelDreamer, OfflineTidier

    chosen = values("DREAMER")
    if chosen == "offline-hold":
        return HoldingTidier(float(values("DREAM_HOLD")))
    if chosen == "anthropic":
        import anthropic

        return ModelDreamer(anthropic.Anthropic)  # the client is made on the first dream
    return OfflineTidier()


def dream_timeout(values: Values) -> float:
    """``GITMEM_DREAM_TIMEOUT``: seconds a dream may run."""
    return float(values("DREAM_TIMEOUT"))

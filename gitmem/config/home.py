"""The typed settings turned into what the library takes: the home, the push hooks' options, the keys'
sources, the write filters and the dreamer.

A program reads its settings where it starts (the CLI, the app factory, the hooks) into a
:class:`gitmem.config.values.Config` and asks here for what it needs, handing over the part it concerns.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.config.values import Config, Dreams, Keys, Storage, WriteRules

# What a push hook may not need is imported where it is used: Git starts the hooks twice a push.
if TYPE_CHECKING:
    from gitmem.agents.dreams.dreamers import Dreamer
    from gitmem.crypto.master_key import MasterKeySource
    from gitmem.crypto.signing_key import HomeSigner, SigningKeySource
    from gitmem.engine.gitmem import Gitmem
    from gitmem.engine.push.receive import PushOptions
    from gitmem.rules.filters import FilterChain


def home_path(storage: Storage) -> Path:
    """``GITMEM_HOME``, else ``$XDG_DATA_HOME/gitmem``."""
    if storage.home is not None:
        return storage.home
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "gitmem"


def master_key(keys: Keys) -> MasterKeySource:
    from gitmem.crypto.master_key import MasterKeySource  # not for a push to an unencrypted store

    return MasterKeySource(text=keys.master_key, file=keys.master_key_file)


def signing_key(keys: Keys) -> SigningKeySource:
    from gitmem.crypto.signing_key import SigningKeySource  # not for a push hook that signs nothing

    return SigningKeySource(text=keys.signing_key, file=keys.signing_key_file)


def home_signer(keys: Keys, home: Path) -> HomeSigner:
    """The key that signs the home's commits (a push's record, in post-receive)."""
    from gitmem.crypto.signing_key import HomeSigner

    return HomeSigner(home, signing_key(keys))


def filters(rules: WriteRules) -> FilterChain:
    from gitmem.rules.filters import load_filters  # not for post-receive, which checks nothing

    return load_filters(rules.filters, rules.secrets_allow)


def open_home(config: Config, home: Path | None = None) -> Gitmem:
    """The home the settings name (or ``home``), opened with their options, its changes told to the
    webhooks' outbox."""
    from gitmem.engine.gitmem import Gitmem  # not for a push hook that never opens the home
    from gitmem.webhooks.outbox import webhooks_for

    gm = Gitmem.open(
        home if home is not None else home_path(config.storage),
        database=config.storage.database,
        fsync=config.durability.mode,
        master_key=master_key(config.keys),
        filters=filters(config.rules),
        search_budget=config.limits.search_budget,
        signing_key=signing_key(config.keys),
    )
    gm.listen(webhooks_for(gm))
    return gm


def push_options(config: Config) -> PushOptions:
    """What the push hooks take: the index's database, the rules of a write, and the home to open."""
    from gitmem.engine.push.receive import PushOptions
    from gitmem.webhooks.tables import wants_note_events

    return PushOptions(
        database_url=config.storage.database,
        filters=lambda: filters(config.rules),
        open_home=lambda home: open_home(config, home),
        signer=lambda home: home_signer(config.keys, home),
        listening=wants_note_events,  # the home's one listener is the webhooks' outbox (open_home)
        durability=config.durability,
    )


def dreamer(dreams: Dreams) -> Dreamer:
    """``GITMEM_DREAMER``: ``offline`` (default), ``anthropic`` (the SDK, configured from its own
    environment: ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``) or ``offline-hold`` (for tests, holding
    each dream ``GITMEM_DREAM_HOLD`` seconds)."""
    from gitmem.agents.dreams.dreamers import HoldingTidier, ModelDreamer, OfflineTidier

    if dreams.dreamer == "offline-hold":
        return HoldingTidier(dreams.hold)
    if dreams.dreamer == "anthropic":
        import anthropic

        return ModelDreamer(anthropic.Anthropic)  # the client is made on the first dream
    return OfflineTidier()

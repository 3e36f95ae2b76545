"""gitmem: a memory store for AI agents in which every store is a bare Git repository.

The engine. It knows nothing of HTTP; ``api/`` puts it on the network.
"""

from gitmem.errors import GitmemError
from gitmem.model import Actor, MemoryPrefix, Note, Page, StoreInfo, Version

__all__ = ["Actor", "GitmemError", "MemoryPrefix", "Note", "Page", "StoreInfo", "Version"]

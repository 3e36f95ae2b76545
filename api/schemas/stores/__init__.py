"""The wire models of :mod:`gitmem.api.routers.stores`, one module a router: :mod:`.memory_stores`,
:mod:`.memories`, :mod:`.memory_versions`, :mod:`.search` (with diff and restore), :mod:`.conflicts`,
:mod:`.review`, :mod:`.memory_tool` and :mod:`.audit`.
"""

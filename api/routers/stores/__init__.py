"""A memory store and everything in it: the SDK's :mod:`.memory_stores`, :mod:`.memories` and
:mod:`.memory_versions`; gitmem's own :mod:`.search` (with diff and restore), :mod:`.conflicts`,
:mod:`.review`, :mod:`.memory_tool` and :mod:`.audit` (the signing key, a store's audit, erasure
receipts); Git's smart HTTP (:mod:`.git`, a raw ASGI endpoint).
"""

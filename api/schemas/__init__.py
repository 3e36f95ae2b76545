"""The wire's models (pydantic, at the HTTP edge only): one module for each router of
:mod:`gitmem.api.routers` (:mod:`.memory_stores`, :mod:`.memories`, :mod:`.memory_versions`, :mod:`.dreams`,
:mod:`.search`, :mod:`.conflicts`, :mod:`.review`, :mod:`.tasks` for workers and tasks, :mod:`.profiles`,
:mod:`.users`, :mod:`.health`, :mod:`.audit`), and what they share (:mod:`.common`).
"""

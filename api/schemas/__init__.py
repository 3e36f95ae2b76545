"""The wire's models (pydantic, at the HTTP edge only), a tree that mirrors :mod:`gitmem.api.routers`:
``schemas/stores/memories.py`` holds the models of ``routers/stores/memories.py``, and so on for every
router that has models (:mod:`.stores`, :mod:`.agents`, :mod:`.users`, :mod:`.webhooks`, :mod:`.health`,
:mod:`.maintenance`); what they share is :mod:`.common`.
"""

"""Git's hooks, installed as data beside the package (``gitmem/hooks``): the push hooks ``pre-receive``
and ``post-receive``, which run ``gitmem hook ...`` (:mod:`.push`, which ``python -m gitmem`` runs for
them without the command-line framework), and an agent runtime's session hooks (``agent/``).
"""

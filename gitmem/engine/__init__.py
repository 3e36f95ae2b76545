"""The engine (porcelain): a data home (:mod:`.gitmem`) and what it holds.

- :mod:`.open_stores`: the stores a process holds open, a bounded cache lent out and returned, made of
  :mod:`.store_handles` (a handle, the lease scopes, the sweeper's thread);
- :mod:`.change_listeners`: who is told of each change that lands (the webhooks' outbox);
- :mod:`.catalog`: workspaces, keys, users and stores' rows;
- :mod:`.store`: one store's notes and versions, the group commit that writes them, diff and restore;
- :mod:`.index`: a store's derived index and its search;
- :mod:`.rewrite`: history rewriting (retention, redaction, key rotation) and the purge;
- :mod:`.push`: what Git's push hooks run;
- :mod:`.audit`: who changed what (``gitmem log``); :mod:`.fsck`: consistency checks;
- :mod:`.transfer`: a store's whole history out to an archive and in from an archive, another server
  or a folder (``gitmem export``, ``gitmem import``);
- :mod:`.web_sessions` (the web view's sign-ins), :mod:`.first_run` (a new home's first key) and
  :mod:`.readiness` (whether this node can take work, for ``/readyz``).

Above it: agents, banks, webhooks and access; below it: the storage interface (:mod:`gitmem.db`),
Git's plumbing (:mod:`gitmem.git`), encryption (:mod:`gitmem.crypto`) and the rules.
"""

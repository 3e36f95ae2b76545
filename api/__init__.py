"""gitmem's HTTP API: a thin FastAPI layer over the engine, wire-compatible with the official SDK.

It routes, authenticates, (de)serialises and maps engine errors to the error envelope. It knows
nothing of Git: every rule lives in ``gitmem/``. What lives here:

- the application and its factory (:mod:`.app`, with its own settings :mod:`.settings`): it opens
  nothing itself, makes the home's parts (``gitmem.parts.Parts``) once and hands them down;
- the routers (:mod:`.routers`: ``stores/`` for a store and what is in it, ``agents/`` for workers,
  tasks, dreams and profiles) and their wire models (:mod:`.schemas`, the same tree);
- what a route depends on (:mod:`.deps`): the home and its parts, the caller, what a task's token or
  a key that is not a user's may not do at all, and the store as the caller may read it;
- who is calling (:mod:`.auth`): the one authentication and rate limit of REST, MCP and Git (the
  buckets in :mod:`.ratelimit`);
- the error envelope (:mod:`.errors`), answers already valid (:mod:`.responses`), request ids, body
  limits and the last-resort 500 (:mod:`.middleware`), a graceful stop (:mod:`.draining`);
- MCP (:mod:`.mcp`, its tools a table) and the web view (:mod:`.ui`).

Where to start reading: :mod:`.app` (what is mounted, in which order), :mod:`.deps` and :mod:`.auth`
(what every request passes before its handler), then one router, ``routers/stores/memories.py``.
docs/architecture.md walks a write through them step by step.

Wire decisions where the SDK and the seeds leave room:

- ``limit`` above an endpoint's maximum (1,000 notes, 100 stores or versions) is 400; with
  ``view=full`` a larger limit is clamped to 20 (a page holds at most 20, ``next_page`` goes on).
- A task's writes appear as ``{"type": "session_actor", "session_id": <task id>}``: the SDK's
  ``created_by`` union knows sessions, which are the seed's tasks. ``task_id`` and ``session_id``
  are the same version filter; different values in both are 400. ``service_account_id`` matches
  nothing (there are no service accounts).
- ``content: null`` on create makes an empty note; ``null`` fields on update mean "leave as is".
- Unknown body fields are 400; unknown query parameters (``beta=true``) are ignored.
- Memory responses send ``ETag: "<blob id>"``; update and delete accept ``If-Match`` with it
  (``*`` only asks that the note exists). A weak or malformed tag is 400.
- ``anthropic-workspace-id``, if sent, must be the key's workspace (else 403).
- ``x-should-retry`` is ``false`` on every error a retry cannot fix, ``true`` on retryable ones
  (429, a busy store); an unexpected 500 carries neither, leaving the client's default.
- 405 is ``invalid_request_error``; bodies over 1 MiB are 413 ``request_too_large`` before
  parsing; a note over 100 KiB is the engine's 413.
"""

"""The routers, one a resource, in two families and the node's own:

- :mod:`.stores`: a memory store and everything in it (the SDK's stores, memories and versions;
  gitmem's search with diff and restore, conflicts, review, the memory tool, the audit, Git over HTTP);
- :mod:`.agents`: the agents' work (workers, tasks, the SDK's dreams, profiles and their banks);
- here: the workspace's :mod:`.users` and :mod:`.webhooks`, and the node's probes (:mod:`.health`),
  :mod:`.metrics` and :mod:`.maintenance`.

Each router's wire models are the module of the same name under :mod:`gitmem.api.schemas` (Git's smart
HTTP and the Prometheus text of :mod:`.metrics` have none); ``tests/unit/test_api_layout.py`` holds the
two trees to each other.
"""

"""The catalog: workspaces, keys, users and stores' rows (:mod:`.catalog`), what a node may keep of them
between requests (:mod:`.cache`), the web view's sign-in sessions and a first run's workspace.
"""

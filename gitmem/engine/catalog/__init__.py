"""The catalog: workspaces, keys, users and stores' rows (:mod:`.catalog`), and what a node may keep of
them between requests (:mod:`.cache`).
"""

"""One memory store: its notes and versions (:mod:`.store`), the group commit that writes them
(:mod:`.group_commit`, planned by :mod:`.write_plans`), and what reads a version against another
(:mod:`.diff`, :mod:`.restore`); the writes refused for a stale precondition, kept as conflicts
(:mod:`.conflicts`), seen and resolved (:mod:`.conflict_resolution`), or merged when asked
(:mod:`.stale_merge`).
"""

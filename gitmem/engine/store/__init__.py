"""One memory store: its notes and versions (:mod:`.store`, read through :mod:`.reading`), the group
commit that writes them (:mod:`.group_commit`, planned by :mod:`.write_plans`), and what reads a version
against another (:mod:`.diff`, :mod:`.restore`); the writes refused for a stale precondition, kept as
conflicts (:mod:`.conflicts`, each note's line of them in Git: :mod:`.conflict_line`), seen and resolved
(:mod:`.conflict_resolution`), or merged when asked (:mod:`.stale_merge`).
"""

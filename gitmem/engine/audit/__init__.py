"""The audit: who changed which note, when and how (:mod:`.log`, ``gitmem log``); the rewrite log as
the audit reads it (:mod:`.rewrites`); a store checked end to end (:mod:`.verify`, ``gitmem audit
verify``), today's history against an older clone's (:mod:`.compare`)."""

"""The audit: who changed which note, when and how (:mod:`.log`, ``gitmem log``)."""

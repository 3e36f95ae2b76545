"""Moving a store's whole history in and out (docs/import-export.md).

- :mod:`.values`: what an import replays (:class:`~.values.Incoming`), what a folder refused, the report;
- :mod:`.replay`: replaying versions into a new or empty store, oldest first, in batches, resumably;
- :mod:`.journal`: which store an unfinished import goes on into, and what its source has spooled;
- :mod:`.archive`: ``gitmem export``'s archive (a Git bundle and the versions as JSON lines), written and read;
- :mod:`.api_source`: another server's versions, listed through the ``anthropic`` SDK;
- :mod:`.folder`: a folder of Markdown files (an Obsidian or basic-memory vault), each file a note.
"""

"""Commands that run and keep a home: ``serve`` (:mod:`.serve`); ``migrate``, ``db`` (:mod:`.database`);
``reindex``, ``fsck``, ``pack`` (:mod:`.maintenance`); ``prune``, ``retention`` (:mod:`.prune`); ``backup``
and a backup's ``restore`` (:mod:`.backup`); ``settings`` (:mod:`.settings`); and the hidden ``hook`` and
``git-filter`` that Git and agent runtimes start (:mod:`.internal`).

Imports nothing: a hook or a filter that Git starts pays for its own module only."""

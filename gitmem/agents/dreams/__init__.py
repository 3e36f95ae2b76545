"""Dreams: background jobs that read a store and write a tidier one. :mod:`.dreams` (create, list,
cancel), :mod:`.request` (what may be asked), :mod:`.values`, :mod:`.tables`, :mod:`.ledger` (a dream's
state changes, one transaction each), :mod:`.job` (one run), :mod:`.runner` (the background runner) and
:mod:`.dreamers` (what turns notes into tidier notes).
"""

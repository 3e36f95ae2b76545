"""One router per resource: the SDK's :mod:`.memory_stores`, :mod:`.memories`, :mod:`.memory_versions`
and :mod:`.dreams`; gitmem's own :mod:`.search` (with diff and restore), :mod:`.conflicts`,
:mod:`.review`, :mod:`.memory_tool`, :mod:`.workers`, :mod:`.tasks`, :mod:`.profiles`, :mod:`.users`,
:mod:`.webhooks`, :mod:`.maintenance` and :mod:`.audit` (the signing key); Git's smart HTTP
(:mod:`.git`); the probes (:mod:`.health`) and :mod:`.metrics`.
"""

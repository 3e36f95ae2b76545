"""Commands on who may do what, and the keys that prove it: ``users`` and their API keys, ``keys``
(:mod:`.users`); stores' encryption keys, ``encryption`` (:mod:`.encryption`); the home's signing key,
``audit`` with the signing key's ``audit key`` and ``audit rotate-key`` (:mod:`.signing`)."""

"""Commands on who may do what, and the keys that prove it: ``users`` and their API keys, ``keys``
(:mod:`.users`); stores' encryption keys, ``encryption`` (:mod:`.encryption`); the home's signing key,
``keys signing``, ``keys rotate-signing``, and ``audit`` (:mod:`.signing`)."""

"""Encryption at rest: the master key (:mod:`.master_key`), the key ring of wrapped data keys
(:mod:`.keyring`) and the content codec (:mod:`.codec`). Rotating a store's key is a history rewrite
(:mod:`gitmem.engine.rewrite.rotation`)."""

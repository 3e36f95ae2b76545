"""Keys: encryption at rest, the master key (:mod:`.master_key`), the key ring of wrapped data keys
(:mod:`.keyring`) and the content codec (:mod:`.codec`); the home's signing key (:mod:`.signing_key`)
and Ed25519 signatures in OpenSSH's format (:mod:`.sshsig`). Rotating a store's key is a history rewrite
(:mod:`gitmem.engine.rewrite.rotation`)."""

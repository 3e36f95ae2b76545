"""Encryption at rest: master key, key ring, the content codec, key rotation."""

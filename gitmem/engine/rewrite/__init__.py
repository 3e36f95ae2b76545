"""Rewriting history: one mechanism (:mod:`.rewrite`: read with :mod:`.history`, write with
:mod:`.fast_import`, delete with :mod:`.purge`) behind retention, redaction and key rotation.
"""

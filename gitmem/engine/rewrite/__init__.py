"""Rewriting history: one mechanism (:mod:`.rewrite`: read with :mod:`.history`, write with
:mod:`.fast_import`, delete with :mod:`.purge`; Git run under the rewrite's locks in :mod:`.locked_git`;
what it did in :mod:`.report`, what it erased in a signed receipt, :mod:`.receipts`) behind
:mod:`.retention` (run on the server's schedule by :mod:`.pruner`), :mod:`.redaction` and key rotation
(:mod:`.rotation`), and the conflict lines rewritten with them (:mod:`.conflicts`).
"""

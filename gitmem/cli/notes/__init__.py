"""Commands on stores and their notes: ``store`` (:mod:`.stores`); ``note``, ``versions``, ``redact``
(:mod:`.notes`); ``search``, ``diff``, ``restore`` (:mod:`.find`); ``conflicts`` (:mod:`.conflicts`);
``review`` (:mod:`.review`); ``log`` (:mod:`.audit`); ``export``, ``import`` (:mod:`.transfer`); and a
store on the user's own machine: ``clone`` (:mod:`.clone`), ``mount``, ``bank-mount`` (:mod:`.mount`)."""

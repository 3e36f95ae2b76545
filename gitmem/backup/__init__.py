"""Backups and restores of a whole home (docs/backup.md): what a backup is on disk (:mod:`.layout`),
the catalog copied at one moment (:mod:`.catalog_copy`), taking one while the home serves
(:mod:`.take`), restoring one into a new home (:mod:`.restore`) that erases again what was erased
since (:mod:`.erase_again`), and dropping old backups and destroyed keys (:mod:`.prune`).
"""

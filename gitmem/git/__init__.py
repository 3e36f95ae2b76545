"""Git's plumbing: bare repositories and refs (:mod:`.repository`), trees and commits in memory
(:mod:`.trees`), a version as a commit (:mod:`.commits`), signed (:mod:`.signing`), pushed commits
(:mod:`.pushes`) and the one replay of history (:mod:`.replay`), a clone's encryption filter
(:mod:`.crypt_filter`); a ref moved with its objects as one pack (:mod:`.ref_pack`), the commits that
record conflicts (:mod:`.conflict_records`) and the rewrite log (:mod:`.rewrite_log`). Two families in
folders: :mod:`.pack` (the pack format, the packer, its policy, roll-ups and what a killed packer
leaves) and :mod:`.transport` (smart HTTP). Knows nothing of notes' rules or the catalog."""

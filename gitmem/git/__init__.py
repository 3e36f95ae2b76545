"""Git's plumbing: bare repositories and refs (:mod:`.repository`), trees and commits in memory
(:mod:`.trees`), a version as a commit (:mod:`.commits`), signed (:mod:`.signing`), packs (:mod:`.pack`,
:mod:`.packing`, :mod:`.roll_up`, :mod:`.pack_leftovers`), pushed commits (:mod:`.pushes`) and the one
replay of history (:mod:`.replay`), smart HTTP (:mod:`.smart_http`, :mod:`.http_backend`,
:mod:`.upload_wants`) and a clone's encryption filter (:mod:`.crypt_filter`); a ref moved with its
objects as one pack (:mod:`.ref_pack`), the commits that record conflicts (:mod:`.conflict_records`) and
the rewrite log (:mod:`.rewrite_log`). Knows nothing of notes' rules or the catalog."""

"""Rules, no I/O: what a path may be (:mod:`.paths`), what a store allows (:mod:`.policy`), how large a
page may be (:mod:`.paging`), the write filters (:mod:`.filters`) and the secret detector
(:mod:`.secrets`), and the three-way merge of a note's text (:mod:`.merge`)."""

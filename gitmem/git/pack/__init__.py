"""Packs: the pack format, a batch of objects written as one pack and its index (:mod:`.format`); the
packer, a store packed now or in the background, and what is on disk (:mod:`.packing`); when to pack,
after writes and once a store is quiet (:mod:`.policy`); the geometric roll-up without a walk of history
(:mod:`.roll_up`); a small store consolidated in this process, without git (:mod:`.small`); and what a
killed writer or packer leaves in ``objects/pack`` (:mod:`.leftovers`).
Imports nothing of the rest of :mod:`gitmem.git`, which writes its objects through :mod:`.format`."""

"""Git trees and commits in memory: parse, edit and serialise them without writing loose objects.

The write path builds a batch of commits in memory and writes them into one pack (``gitmem.git.pack``);
pygit2's ``TreeBuilder.write()`` would write every tree as a loose object, flushed on its own.

A parsed tree keeps its entries in Git's order, each already serialised, so that changing one entry
of a 10,000-entry folder costs a binary search and a copy of a list of references, not a parse and a
sort. Parsed trees are cached by object id: an id names one content forever, so a cached tree can
never be stale, whatever rewrote ``main`` in between.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pygit2

MODE_TREE = b"40000"
MODE_BLOB = b"100644"
EMPTY_TREE_ID = bytes.fromhex("4b825dc642cb6eb9a060e54bf8d69288fbee4904")


def object_id(kind: bytes, body: bytes) -> bytes:
    """Git's object id: SHA-1 over ``"<kind> <size>\\0"`` and the body."""
    digest = hashlib.sha1(kind + b" " + str(len(body)).encode() + b"\0", usedforsecurity=False)
    digest.update(body)
    return digest.digest()


def _sort_key(name: bytes, mode: bytes) -> bytes:
    """Git orders a tree's entries by name, a folder's name as if it ended in '/'."""
    return name + b"/" if mode == MODE_TREE else name


@dataclass(frozen=True)
class Tree:
    """A tree's entries in Git's order: sort keys, serialised entries, and (mode, id) by name."""

    keys: tuple[bytes, ...] | list[bytes]
    raw: tuple[bytes, ...] | list[bytes]
    by_name: Mapping[bytes, tuple[bytes, bytes]]

    @classmethod
    def parse(cls, body: bytes) -> Tree:
        keys: list[bytes] = []
        raw: list[bytes] = []
        by_name: dict[bytes, tuple[bytes, bytes]] = {}
        pos, end = 0, len(body)
        while pos < end:
            space = body.index(b" ", pos)
            nul = body.index(b"\0", space)
            mode, name = body[pos:space], body[space + 1 : nul]
            oid = body[nul + 1 : nul + 21]
            if mode == b"040000":  # tolerated on read; Git writes "40000"
                mode = MODE_TREE
            keys.append(_sort_key(name, mode))
            raw.append(body[pos : nul + 21])
            by_name[name] = (mode, oid)
            pos = nul + 21
        return cls(keys, raw, by_name)

    def body(self) -> bytes:
        return b"".join(self.raw)

    def get(self, name: bytes) -> tuple[bytes, bytes] | None:
        return self.by_name.get(name)

    def __len__(self) -> int:
        return len(self.by_name)


EMPTY_TREE = Tree((), (), {})


class TreeEditor:
    """Copy-on-write edits of one tree: removals and insertions, then the new :class:`Tree`."""

    def __init__(self, base: Tree) -> None:
        self._base = base
        self._keys: list[bytes] | None = None
        self._raw: list[bytes] = []
        self._by_name: dict[bytes, tuple[bytes, bytes]] = {}

    def _own(self) -> None:
        if self._keys is None:
            self._keys, self._raw = list(self._base.keys), list(self._base.raw)
            self._by_name = dict(self._base.by_name)

    def get(self, name: bytes) -> tuple[bytes, bytes] | None:
        return (self._by_name if self._keys is not None else self._base.by_name).get(name)

    def remove(self, name: bytes) -> None:
        entry = self.get(name)
        if entry is None:
            return
        self._own()
        assert self._keys is not None
        at = bisect.bisect_left(self._keys, _sort_key(name, entry[0]))
        del self._keys[at], self._raw[at]
        del self._by_name[name]

    def insert(self, name: bytes, mode: bytes, oid: bytes) -> None:
        self.remove(name)  # a name is one entry, whether it was a file or a folder
        self._own()
        assert self._keys is not None
        key = _sort_key(name, mode)
        at = bisect.bisect_left(self._keys, key)
        self._keys.insert(at, key)
        self._raw.insert(at, mode + b" " + name + b"\0" + oid)
        self._by_name[name] = (mode, oid)

    def tree(self) -> Tree:
        if self._keys is None:
            return self._base
        return Tree(self._keys, self._raw, self._by_name)


class TreeStore:
    """Trees by id: those made in this batch, a bounded cache of parsed ones, then the repository."""

    def __init__(self, cache: TreeCache, read: Callable[[bytes], bytes]) -> None:
        self._cache = cache
        self._read = read
        self.new: dict[bytes, Tree] = {}
        self.bodies: dict[bytes, bytes] = {}  # of the new trees, for the pack
        self.delta_bases: dict[bytes, bytes] = {}  # a new tree's previous version, for a delta

    def get(self, oid: bytes) -> Tree:
        tree = self.new.get(oid) or self._cache.get(oid)
        if tree is None:
            tree = Tree.parse(self._read(oid))
            self._cache.put(oid, tree)
        return tree

    def add(self, tree: Tree) -> bytes:
        body = tree.body()
        oid = object_id(b"tree", body)
        self.new[oid] = tree
        self.bodies[oid] = body
        return oid

    def edit(self, base: bytes | None, changes: Mapping[str, bytes | None]) -> bytes:
        """The tree that is ``base`` with each tree path set to a blob id (or removed, for None).

        Empty folders disappear, as in Git; only the trees along changed paths are made."""
        oid = self.add(self._edit(self.get(base) if base is not None else EMPTY_TREE, changes))
        if base is not None:
            self.delta_bases.setdefault(oid, base)
        return oid

    def _edit(self, base: Tree, changes: Mapping[str, bytes | None]) -> Tree:
        here: dict[bytes, bytes | None] = {}
        below: dict[bytes, dict[str, bytes | None]] = {}
        for tree_path, blob in changes.items():
            head, sep, rest = tree_path.partition("/")
            if sep:
                below.setdefault(head.encode(), {})[rest] = blob
            else:
                here[head.encode()] = blob
        editor = TreeEditor(base)
        # Removals, then folders, then blobs: a name may be both (a rename of /a to /a/b removes the
        # blob "a" and fills the folder "a"; /a/b to /a empties the folder "a" and sets the blob "a").
        for name, blob in here.items():
            if blob is None:
                editor.remove(name)
        for name, sub_changes in below.items():
            existing = editor.get(name)
            sub_base = self.get(existing[1]) if existing is not None and existing[0] == MODE_TREE else EMPTY_TREE
            sub_tree = self._edit(sub_base, sub_changes)
            if len(sub_tree) == 0:
                if sub_base is not EMPTY_TREE:
                    editor.remove(name)
            else:
                oid = self.add(sub_tree)
                if existing is not None and sub_base is not EMPTY_TREE:
                    self.delta_bases.setdefault(oid, existing[1])
                editor.insert(name, MODE_TREE, oid)
        for name, blob in here.items():
            if blob is not None:
                editor.insert(name, MODE_BLOB, blob)
        return editor.tree()


class TreeCache:
    """Parsed trees by id, the most recently used kept up to a number of entries in all (each write
    makes a new version of its folders: only the newest few are worth keeping)."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self._max_entries = max_entries
        self._entries = 0
        self._trees: OrderedDict[bytes, Tree] = OrderedDict()

    def get(self, oid: bytes) -> Tree | None:
        tree = self._trees.get(oid)
        if tree is not None:
            self._trees.move_to_end(oid)
        return tree

    def put(self, oid: bytes, tree: Tree) -> None:
        if oid in self._trees:
            self._trees.move_to_end(oid)
            return
        self._trees[oid] = tree
        self._entries += len(tree)
        while self._entries > self._max_entries and len(self._trees) > 1:
            _, evicted = self._trees.popitem(last=False)
            self._entries -= len(evicted)


def _signature(sig: pygit2.Signature) -> bytes:
    offset = sig.offset
    sign = "-" if offset < 0 else "+"
    hours, minutes = divmod(abs(offset), 60)
    return f"{sig.name} <{sig.email}> {sig.time} {sign}{hours:02d}{minutes:02d}".encode()


def commit_body(
    tree: bytes, parents: list[bytes], author: pygit2.Signature, committer: pygit2.Signature, message: str
) -> bytes:
    """A commit object's body, byte for byte what libgit2's ``create_commit`` writes."""
    lines = [b"tree " + tree.hex().encode()]
    lines += [b"parent " + parent.hex().encode() for parent in parents]
    lines += [b"author " + _signature(author), b"committer " + _signature(committer)]
    return b"\n".join(lines) + b"\n\n" + message.encode()


__all__ = [
    "EMPTY_TREE_ID",
    "MODE_BLOB",
    "MODE_TREE",
    "Tree",
    "TreeCache",
    "TreeEditor",
    "TreeStore",
    "commit_body",
    "object_id",
]

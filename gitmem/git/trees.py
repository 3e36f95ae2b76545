"""Git trees and commits in memory: parse, edit and serialise them without writing loose objects.

The write path builds a batch of commits in memory and writes them into one pack (``gitmem.git.pack.format``);
pygit2's ``TreeBuilder.write()`` would write every tree as a loose object, flushed on its own.

A write must not cost more in a folder of 10,000 notes than in one of 100, yet Git stores a folder as
one tree object listing every entry, and each commit needs the folder's new tree. So a parsed tree is
a run of **pieces** of about :data:`PIECE_ENTRIES` entries in Git's order, each holding its entries'
bytes, their compressed form and checksum, each made once. An edit makes a new piece for the entries
it touches and shares every other piece with the previous version; the new tree's bytes are the
pieces' bytes joined, and its zlib stream (for the pack) is the pieces' independent deflate blocks
joined (``gitmem.git.pack.format.zlib_stream``). What stays proportional to the folder is copying its bytes
and hashing them once (SHA-1 for the id, the pack's checksum): no parse, sort or compression of it.

Parsed trees are cached by object id: an id names one content forever, so a cached tree can never
be stale, whatever moved or rewrote ``main`` in between (another process, a push, a history rewrite).
"""

from __future__ import annotations

import bisect
import hashlib
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pygit2

from gitmem.git.pack.format import PackObject, adler32_combine, raw_deflate, zlib_stream

MODE_TREE = b"40000"
MODE_BLOB = b"100644"
EMPTY_TREE_ID = bytes.fromhex("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
# Entries of a piece: an edit recompresses one piece (~5 KB), and the pieces of a 10,000-entry folder
# are few enough (~80) to join in no time. A piece splits at twice this and merges below a quarter.
PIECE_ENTRIES = 128


def object_id(kind: bytes, body: bytes) -> bytes:
    """Git's object id: SHA-1 over ``"<kind> <size>\\0"`` and the body."""
    digest = hashlib.sha1(kind + b" " + str(len(body)).encode() + b"\0", usedforsecurity=False)
    digest.update(body)
    return digest.digest()


def _sort_key(name: bytes, mode: bytes) -> bytes:
    """Git orders a tree's entries by name, a folder's name as if it ended in '/'."""
    return name + b"/" if mode == MODE_TREE else name


class Piece:
    """Consecutive entries of a tree in Git's order (sort keys and serialised entries), never changed
    once made: versions of a folder share the pieces an edit did not touch, and with them their bytes,
    the bytes' Adler-32 checksum and, once first asked for, their compressed form."""

    __slots__ = ("_deflated", "body", "checksum", "keys", "raw")

    def __init__(self, keys: Sequence[bytes], raw: Sequence[bytes]) -> None:
        self.keys: tuple[bytes, ...] = tuple(keys)
        self.raw: tuple[bytes, ...] = tuple(raw)
        self.body = b"".join(self.raw)
        self.checksum = zlib.adler32(self.body)
        self._deflated: bytes | None = None

    @property
    def deflated(self) -> bytes:
        if self._deflated is None:
            self._deflated = raw_deflate(self.body)
        return self._deflated


def _pieces_of(keys: Sequence[bytes], raw: Sequence[bytes]) -> list[Piece]:
    """Entries cut into pieces of PIECE_ENTRIES (the last may be shorter)."""
    return [
        Piece(keys[at : at + PIECE_ENTRIES], raw[at : at + PIECE_ENTRIES]) for at in range(0, len(keys), PIECE_ENTRIES)
    ]


def _entry(raw: bytes) -> tuple[bytes, bytes]:
    """(mode, id) of a serialised entry."""
    mode = raw[: raw.index(b" ")]
    return (MODE_TREE if mode == b"040000" else mode), raw[-20:]


@dataclass(frozen=True, eq=False)
class Tree:
    """A tree's entries in Git's order, as pieces (see the module's docstring)."""

    pieces: tuple[Piece, ...]
    firsts: tuple[bytes, ...]  # each piece's first sort key, to find the piece of a key
    size: int

    @classmethod
    def parse(cls, body: bytes, like: Tree | None = None) -> Tree:
        """The tree ``body`` serialises. ``like`` is a tree it probably shares most entries with (the
        folder as this process last knew it, before another process wrote it): a piece of it found
        whole in ``body`` is taken as it is, so only the entries around what changed are parsed."""
        known = like.pieces if like is not None else ()
        pieces: list[Piece] = []
        keys: list[bytes] = []
        raw: list[bytes] = []
        at = 0  # the first piece of ``like`` that may still be found
        pos, end = 0, len(body)
        while pos < end:
            if at < len(known) and body.startswith(known[at].body, pos):
                pieces += _pieces_of(keys, raw)
                keys, raw = [], []
                pieces.append(known[at])
                pos += len(known[at].body)
                at += 1
                continue
            space = body.index(b" ", pos)
            nul = body.index(b"\0", space)
            mode, name = body[pos:space], body[space + 1 : nul]
            if mode == b"040000":  # tolerated on read; Git writes "40000"
                mode = MODE_TREE
            keys.append(_sort_key(name, mode))
            raw.append(body[pos : nul + 21])
            pos = nul + 21
            while at < len(known) and known[at].keys[0] <= keys[-1]:  # it can no longer come
                at += 1
        pieces += _pieces_of(keys, raw)
        return cls(tuple(pieces), tuple(p.keys[0] for p in pieces), sum(len(p.keys) for p in pieces))

    def body(self) -> bytes:
        return b"".join([piece.body for piece in self.pieces])

    def compressed(self) -> list[bytes]:
        """The body's zlib stream from its pieces, each compressed once (parts to join)."""
        checksum = 1  # Adler-32 of nothing
        for piece in self.pieces:
            checksum = adler32_combine(checksum, piece.checksum, len(piece.body))
        return zlib_stream([piece.deflated for piece in self.pieces], checksum)

    def get(self, name: bytes) -> tuple[bytes, bytes] | None:
        found = _find(self.pieces, self.firsts, name)
        return _entry(self.pieces[found[0]].raw[found[1]]) if found is not None else None

    def __len__(self) -> int:
        return self.size


EMPTY_TREE = Tree((), (), 0)


def _piece_at(firsts: Sequence[bytes], key: bytes) -> int:
    """The piece where ``key`` is or would go: the last whose first key is not after it (or the first)."""
    return max(0, bisect.bisect_right(firsts, key) - 1)


def _find(pieces: Sequence[Piece], firsts: Sequence[bytes], name: bytes) -> tuple[int, int] | None:
    """Piece and place of the entry called ``name``, a file or a folder."""
    if not pieces:
        return None
    for key in (name, name + b"/"):
        at = _piece_at(firsts, key)
        keys = pieces[at].keys
        place = bisect.bisect_left(keys, key)
        if place < len(keys) and keys[place] == key:
            return at, place
    return None


class TreeEditor:
    """Copy-on-write edits of one tree: removals and insertions, then the new :class:`Tree`. Each edit
    remakes one piece; the list of pieces is copied once, on the first edit."""

    def __init__(self, base: Tree) -> None:
        self._base = base
        self._pieces: list[Piece] | None = None
        self._firsts: list[bytes] = []
        self._size = base.size

    def _own(self) -> list[Piece]:
        if self._pieces is None:
            self._pieces, self._firsts = list(self._base.pieces), list(self._base.firsts)
        return self._pieces

    def get(self, name: bytes) -> tuple[bytes, bytes] | None:
        if self._pieces is None:
            return self._base.get(name)
        found = _find(self._pieces, self._firsts, name)
        return _entry(self._pieces[found[0]].raw[found[1]]) if found is not None else None

    def _replace(self, at: int, keys: list[bytes], raw: list[bytes]) -> None:
        """Piece ``at`` now holds these entries: dropped if none, split in two if it grew too big."""
        pieces = self._own()
        if not keys:
            del pieces[at], self._firsts[at]
            return
        half = len(keys) // 2 if len(keys) > 2 * PIECE_ENTRIES else len(keys)
        made = [Piece(keys[:half], raw[:half])] + ([Piece(keys[half:], raw[half:])] if half < len(keys) else [])
        pieces[at : at + 1] = made
        self._firsts[at : at + 1] = [piece.keys[0] for piece in made]

    def remove(self, name: bytes) -> None:
        if self.get(name) is None:
            return
        pieces = self._own()
        found = _find(pieces, self._firsts, name)
        assert found is not None  # noqa: S101  narrows the type for mypy; never a check of input
        at, place = found
        keys, raw = list(pieces[at].keys), list(pieces[at].raw)
        del keys[place], raw[place]
        if len(keys) < PIECE_ENTRIES // 4 and at + 1 < len(pieces):  # a small piece joins the next
            keys += pieces[at + 1].keys
            raw += pieces[at + 1].raw
            del pieces[at + 1], self._firsts[at + 1]
        self._replace(at, keys, raw)
        self._size -= 1

    def insert(self, name: bytes, mode: bytes, oid: bytes) -> None:
        self.remove(name)  # a name is one entry, whether it was a file or a folder
        pieces = self._own()
        key, entry = _sort_key(name, mode), mode + b" " + name + b"\0" + oid
        self._size += 1
        if not pieces:
            pieces.append(Piece((key,), (entry,)))
            self._firsts.append(key)
            return
        at = _piece_at(self._firsts, key)
        keys, raw = list(pieces[at].keys), list(pieces[at].raw)
        place = bisect.bisect_left(keys, key)
        keys.insert(place, key)
        raw.insert(place, entry)
        self._replace(at, keys, raw)

    def tree(self) -> Tree:
        if self._pieces is None:
            return self._base
        return Tree(tuple(self._pieces), tuple(self._firsts), self._size)


class TreeStore:
    """Trees by id: those made in this batch, a bounded cache of parsed ones, then the repository."""

    def __init__(self, cache: TreeCache, read: Callable[[bytes], bytes]) -> None:
        self._cache = cache
        self._read = read
        self.new: dict[bytes, Tree] = {}
        self.bodies: dict[bytes, bytes] = {}  # of the new trees, for the pack
        self.delta_bases: dict[bytes, bytes] = {}  # a new tree's previous version, for a delta

    def known(self, oid: bytes) -> Tree | None:
        """The tree if made in this batch or cached, without reading it."""
        tree = self.new.get(oid)
        return tree if tree is not None else self._cache.get(oid)

    def get(self, oid: bytes, like: Tree | None = None) -> Tree:
        """The tree ``oid``; if it must be read, ``like`` is a tree it probably resembles (see
        :meth:`Tree.parse`)."""
        tree = self.known(oid)
        if tree is None:
            tree = Tree.parse(self._read(oid), like)
            self._cache.put(oid, tree)
        return tree

    def add(self, tree: Tree) -> bytes:
        body = tree.body()
        oid = object_id(b"tree", body)
        self.new[oid] = tree
        self.bodies[oid] = body
        return oid

    def pack_objects(self) -> list[PackObject]:
        """The new trees for the pack, each with its previous version as a possible delta base and,
        when in pieces, its pieces' compressed bytes (made once per piece, shared between versions)."""
        return [
            PackObject(
                b"tree",
                body,
                oid,
                delta_base=self.delta_bases.get(oid),
                compressed=self.new[oid].compressed() if len(self.new[oid].pieces) > 1 else None,
            )
            for oid, body in self.bodies.items()
        ]

    def edit(self, base: bytes | None, changes: Mapping[str, bytes | None], like: bytes | None = None) -> bytes:
        """The tree that is ``base`` with each tree path set to a blob id (or removed, for None).

        Empty folders disappear, as in Git; only the trees along changed paths are made. ``like`` is a
        root this process knew that ``base`` probably resembles (the last one it wrote): its folders,
        if still cached, make reading ``base``'s folders cheap when another process moved ``main``."""
        hint = self.known(like) if like is not None else None
        oid = self.add(self._edit(self.get(base, hint) if base is not None else EMPTY_TREE, changes, hint))
        if base is not None:
            self.delta_bases.setdefault(oid, base)
        return oid

    def _edit(self, base: Tree, changes: Mapping[str, bytes | None], like: Tree | None) -> Tree:
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
            known = like.get(name) if like is not None else None
            sub_like = self.known(known[1]) if known is not None and known[0] == MODE_TREE else None
            sub_base = EMPTY_TREE
            if existing is not None and existing[0] == MODE_TREE:
                sub_base = self.get(existing[1], sub_like)
            sub_tree = self._edit(sub_base, sub_changes, sub_like)
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
    "PIECE_ENTRIES",
    "Piece",
    "Tree",
    "TreeCache",
    "TreeEditor",
    "TreeStore",
    "commit_body",
    "object_id",
]

"""Writing a batch of objects as one Git pack (version 2) and its index (version 2).

A write's objects (blob, trees, commit) used to be written loose, each flushed on its own. A batch
of writes now goes into one pack flushed once, the way Git's ``core.fsyncMethod=batch`` makes many
objects durable together: the ``.pack`` and ``.idx`` are written under temporary names, flushed,
and renamed into ``objects/pack`` (``.pack`` first: a pack is used once its ``.idx`` exists), then
the folder is flushed. libgit2 finds a new pack on its next lookup miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import struct
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gitmem import durable
from gitmem.durable import DURABLE, Durability, fsync_dir

OBJ_COMMIT = 1
OBJ_TREE = 2
OBJ_BLOB = 3
OBJ_OFS_DELTA = 6
KIND_CODES = {b"commit": OBJ_COMMIT, b"tree": OBJ_TREE, b"blob": OBJ_BLOB}
# Fast compression: packs of a batch are small and the background packer recompresses them anyway.
COMPRESSION_LEVEL = 1
# A version 2 pack index: this header, then 256 running counts of ids by first byte (the last is the
# number of objects), then the ids, their CRCs, their offsets and two checksums.
INDEX_HEADER = b"\xfftOc" + struct.pack(">I", 2)
_OBJECT_COUNT_AT = len(INDEX_HEADER) + 255 * 4
_IDS_AT = _OBJECT_COUNT_AT + 4


@dataclass(frozen=True)
class PackObject:
    kind: bytes  # b"blob", b"tree" or b"commit"
    body: bytes
    oid: bytes  # 20 bytes
    # An object this one is likely to resemble (a folder's previous tree): if it comes earlier in the
    # same pack, this one is stored as a delta against it.
    delta_base: bytes | None = None
    # The body's zlib stream already made, in parts to join (a big tree from its pieces, see
    # ``zlib_stream``), stored instead of compressing the whole body again.
    compressed: Sequence[bytes] | None = None


# A delta is used only for objects at least this big, and only if it is less than half their size.
DELTA_MIN_SIZE = 1024


def raw_deflate(data: bytes) -> bytes:
    """``data`` as raw deflate blocks that end on a byte boundary and refer to nothing before them:
    such pieces, compressed each on its own, can be joined into one stream (see :func:`zlib_stream`)."""
    compressor = zlib.compressobj(COMPRESSION_LEVEL, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


_ZLIB_HEADER = b"\x78\x01"  # deflate, 32 KiB window, "fastest" (any valid header inflates the same)
_FINAL_EMPTY_BLOCK = b"\x03\x00"  # a last, empty block of fixed codes


def zlib_stream(pieces: Sequence[bytes], checksum: int) -> list[bytes]:
    """A body's zlib stream from its pieces made by :func:`raw_deflate`, as parts to join: the header,
    the pieces, a final empty block and the Adler-32 ``checksum`` of the whole body (the way pigz joins
    blocks compressed in parallel)."""
    return [_ZLIB_HEADER, *pieces, _FINAL_EMPTY_BLOCK, struct.pack(">I", checksum)]


_ADLER_BASE = 65521


def adler32_combine(first: int, second: int, second_length: int) -> int:
    """The Adler-32 of two pieces of data joined, from theirs (zlib's ``adler32_combine``)."""
    rem = second_length % _ADLER_BASE
    low = ((first & 0xFFFF) + (second & 0xFFFF) + _ADLER_BASE - 1) % _ADLER_BASE
    high = ((first >> 16) + (second >> 16) + rem * (first & 0xFFFF) + _ADLER_BASE - rem) % _ADLER_BASE
    return (high << 16) | low


def _entry_header(code: int, size: int) -> bytes:
    """Type and size: 3 bits of type and 4 of size in the first byte, then 7 bits a byte."""
    out = bytearray()
    byte = (code << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


# Flushes the .idx while the caller flushes the .pack: the filesystem's journal takes both in one commit.
# Where the process flushes whole file systems (Linux, GITMEM_FSYNC=always) it is not used. Otherwise
# each batch hands it two flushes: 32 threads (made only when needed) let 16 stores flush at once.
_flusher = ThreadPoolExecutor(max_workers=32, thread_name_prefix="gitmem-fsync")  # stores never queue behind one


_temp_names = itertools.count()


def _write_temp(folder: Path, data: bytes) -> tuple[Path, int]:
    """``data`` in a new read-only file of ``folder`` under a name no other writer uses (this process's
    id and a counter; one left by a crashed process of the same id is skipped). Returns the path and
    the still open descriptor, to flush the file without opening it again; the caller closes it."""
    while True:
        name = os.path.join(folder, f"tmp_pack_{os.getpid()}_{next(_temp_names)}")
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            break
        except FileExistsError:
            continue
    try:
        with memoryview(data) as rest:
            while rest:
                rest = rest[os.write(fd, rest) :]
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        raise
    return Path(name), fd


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if not n:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _common_length(a: bytes, b: bytes, limit: int, *, from_end: bool) -> int:
    """How many bytes ``a`` and ``b`` share at their start (or end), at most ``limit``: blocks
    compared whole, then a binary search in the first block that differs."""
    block = 4096
    done = 0
    while done < limit:
        size = min(block, limit - done)
        if from_end:
            same = a[len(a) - done - size : len(a) - done] == b[len(b) - done - size : len(b) - done]
        else:
            same = a[done : done + size] == b[done : done + size]
        if not same:
            break
        done += size
    else:
        return limit
    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if from_end:
            same = a[len(a) - done - mid : len(a) - done] == b[len(b) - done - mid : len(b) - done]
        else:
            same = a[done : done + mid] == b[done : done + mid]
        if same:
            lo = mid
        else:
            hi = mid - 1
    return done + lo


def delta(base: bytes, target: bytes) -> bytes:
    """A Git delta that makes ``target`` from ``base``: copy their common start and end, insert the
    rest (a tree that gained, lost or changed one entry is a few dozen bytes)."""
    prefix = _common_length(base, target, min(len(base), len(target)), from_end=False)
    suffix = _common_length(base, target, min(len(base), len(target)) - prefix, from_end=True)
    out = bytearray(_varint(len(base)) + _varint(len(target)))

    def copy(offset: int, size: int) -> None:
        while size:
            chunk = min(size, 0xFFFFFF)
            cmd, args = 0x80, bytearray()
            for i in range(4):
                if (offset >> (8 * i)) & 0xFF:
                    cmd |= 1 << i
                    args.append((offset >> (8 * i)) & 0xFF)
            for i in range(3):
                if (chunk >> (8 * i)) & 0xFF:
                    cmd |= 0x10 << i
                    args.append((chunk >> (8 * i)) & 0xFF)
            out.append(cmd)
            out.extend(args)
            offset += chunk
            size -= chunk

    copy(0, prefix)
    middle = target[prefix : len(target) - suffix]
    for start in range(0, len(middle), 127):
        piece = middle[start : start + 127]
        out.append(len(piece))
        out.extend(piece)
    copy(len(base) - suffix, suffix)
    return bytes(out)


def _ofs_distance(distance: int) -> bytes:
    """The back-distance of an OFS_DELTA's base, in Git's offset encoding."""
    out = [distance & 0x7F]
    distance >>= 7
    while distance:
        distance -= 1
        out.append(0x80 | (distance & 0x7F))
        distance >>= 7
    return bytes(reversed(out))


def encode(objects: Sequence[PackObject]) -> tuple[bytes, bytes]:
    """The pack and its index for ``objects`` (each id once)."""
    pack = bytearray(b"PACK" + struct.pack(">II", 2, len(objects)))
    located: list[tuple[bytes, int, int]] = []  # id, crc32, offset
    earlier: dict[bytes, tuple[int, bytes]] = {}  # id -> offset and body, of possible delta bases
    for obj in objects:
        offset = len(pack)
        base = earlier.get(obj.delta_base) if obj.delta_base is not None else None
        entry = b""
        if base is not None:
            patch = delta(base[1], obj.body)
            if len(patch) * 2 < len(obj.body):
                entry = (
                    _entry_header(OBJ_OFS_DELTA, len(patch))
                    + _ofs_distance(offset - base[0])
                    + zlib.compress(patch, COMPRESSION_LEVEL)
                )
        if not entry:
            header = _entry_header(KIND_CODES[obj.kind], len(obj.body))
            if obj.compressed is not None:
                entry = b"".join([header, *obj.compressed])
            else:
                entry = header + zlib.compress(obj.body, COMPRESSION_LEVEL)
        if len(obj.body) >= DELTA_MIN_SIZE:
            earlier[obj.oid] = (offset, obj.body)
        pack += entry
        located.append((obj.oid, zlib.crc32(entry), offset))
    if len(pack) >= 1 << 31:
        raise ValueError("a batch pack over 2 GiB")  # would need the index's 8-byte offset table
    checksum = hashlib.sha1(pack, usedforsecurity=False).digest()
    pack += checksum
    located.sort()
    per_first_byte = [0] * 256
    for oid, _, _ in located:
        per_first_byte[oid[0]] += 1
    fanout = list(itertools.accumulate(per_first_byte))
    index = bytearray(INDEX_HEADER)
    index += struct.pack(">256I", *fanout)
    index += b"".join(oid for oid, _, _ in located)
    index += struct.pack(f">{len(located)}I", *(crc for _, crc, _ in located))
    index += struct.pack(f">{len(located)}I", *(offset for _, _, offset in located))
    index += checksum
    index += hashlib.sha1(index, usedforsecurity=False).digest()
    return bytes(pack), bytes(index)


def write_pack(
    objects_dir: Path,
    objects: Sequence[PackObject],
    *,
    durability: Durability = DURABLE,
    flush_with: Callable[[], None] | None = None,
    flush_folder: bool = True,
) -> Path:
    """Write ``objects`` as one pack into ``objects_dir/pack``; return the ``.pack`` path.

    ``durability``: unless ``never``, both files are on disk before they are renamed into place, by one
    ``syncfs`` where it flushes whole file systems (it takes ``flush_with``'s file too), else by an fsync each, with
    ``flush_with`` (another file's flush, such as the ref's lock file) beside them. With
    ``flush_folder=False`` the caller flushes the pack's folder (see :func:`flush_folders`)."""
    unique = list({obj.oid: obj for obj in objects}.values())
    pack, index = encode(unique)
    folder = objects_dir / "pack"
    name = "pack-" + pack[-20:].hex()
    try:
        pack_tmp, pack_fd = _write_temp(folder, pack)
    except FileNotFoundError:  # a repository that never had a pack
        folder.mkdir(exist_ok=True)
        pack_tmp, pack_fd = _write_temp(folder, pack)
    index_fd = -1
    try:
        index_tmp, index_fd = _write_temp(folder, index)
        try:
            if durability.whole_file_system:
                durable.flush_file_system(folder)  # both files, and what ``flush_with`` would flush
            elif durability.flushes:
                others = [_flusher.submit(os.fsync, index_fd)]
                if flush_with is not None:
                    others.append(_flusher.submit(flush_with))
                os.fsync(pack_fd)
                for other in others:
                    other.result()
            elif flush_with is not None:
                flush_with()
        except BaseException:
            index_tmp.unlink(missing_ok=True)
            raise
    except BaseException:
        pack_tmp.unlink(missing_ok=True)
        raise
    finally:
        for fd in (pack_fd, index_fd):
            if fd >= 0:
                os.close(fd)
    pack_path = folder / f"{name}.pack"
    os.replace(pack_tmp, pack_path)
    os.replace(index_tmp, folder / f"{name}.idx")
    if durability.flushes and flush_folder:
        flush_folders([folder], durability)
    return pack_path


def index_object_count(index_path: Path) -> int:
    """How many objects a pack index lists (its header's last running count, read alone)."""
    with open(index_path, "rb") as f:
        f.seek(_OBJECT_COUNT_AT)
        (count,) = struct.unpack(">I", f.read(4))
    return int(count)


def index_object_ids(index_path: Path) -> list[bytes]:
    """The object ids a version 2 pack index lists."""
    data = index_path.read_bytes()
    if not data.startswith(INDEX_HEADER):
        raise ValueError(f"{index_path.name} is not a version 2 pack index")
    (count,) = struct.unpack_from(">I", data, _OBJECT_COUNT_AT)
    return [data[i : i + 20] for i in range(_IDS_AT, _IDS_AT + 20 * count, 20)]


def flush_folders(folders: Sequence[Path], durability: Durability = DURABLE) -> None:
    """Flush several folders' entries at once (on a journaling filesystem, in one journal commit); where
    ``durability`` flushes whole file systems, one ``syncfs`` for each file system they are on."""
    if durability.whole_file_system:
        for folder in {os.stat(folder).st_dev: folder for folder in folders}.values():
            durable.flush_file_system(folder)
        return
    others = [_flusher.submit(fsync_dir, folder) for folder in folders[1:]]
    if folders:
        fsync_dir(folders[0])
    for other in others:
        other.result()


__all__ = [
    "OBJ_BLOB",
    "OBJ_COMMIT",
    "OBJ_TREE",
    "PackObject",
    "adler32_combine",
    "delta",
    "encode",
    "flush_folders",
    "index_object_count",
    "index_object_ids",
    "raw_deflate",
    "write_pack",
    "zlib_stream",
]

"""What encryption at rest costs: an encrypted store beside a plain one, in the same run.

    python -m bench.encryption [--notes 300] [--size 2048] [--rounds 3] [--fsync always|never]

Both stores live in one fresh data home and do the same work, interleaved round by round and
alternating which goes first (create, update, read by id with content, list with view=full, reopen the
store, which reads the key ring); each cell is the median of the rounds. The ratio is encrypted / plain.
The first two rows time the codec alone (AES-SIV against the identity codec), the price encryption adds
to every blob write and read; the last row is each repository's size after ``git repack -a -d``.
On a busy machine the end-to-end rows move by more than the codec costs: compare them over several runs.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import statistics
import string
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.model import Actor

if TYPE_CHECKING:
    from gitmem.crypto.codec import ContentCodec

ACTOR = Actor("api_actor", "apikey_bench")


def _text(rng: random.Random, size: int) -> str:
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(size // 5 + 1)]
    return " ".join(words)[:size]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _packed_bytes(repo: Path) -> int:
    subprocess.run(["git", "-C", str(repo), "repack", "-a", "-d", "-q"], check=True)
    return sum(p.stat().st_size for p in (repo / "objects" / "pack").glob("*.pack"))


def _encode_all(codec: ContentCodec, data: list[bytes]) -> list[bytes]:
    return [codec.encode(f"bench/n{i:05}.md", d) for i, d in enumerate(data)]


def _decode_all(codec: ContentCodec, blobs: list[bytes]) -> list[bytes]:
    return [codec.decode(f"bench/n{i:05}.md", b) for i, b in enumerate(blobs)]


def _codec_rows(bodies: list[str]) -> list[tuple[str, float, float, str]]:
    """The codec alone (no Git, no index): what AES-SIV adds to each blob write and read."""
    from gitmem.crypto.codec import PlainCodec, SivCodec
    from gitmem.crypto.master_key import DataKey

    plain, codec = PlainCodec(), SivCodec(DataKey.generate(), "memstore_bench")
    data = [b.encode() for b in bodies]
    rows = []
    for name in ("encode", "decode"):
        cells = []
        for c in (plain, codec):
            blobs = [c.encode(f"bench/n{i:05}.md", d) for i, d in enumerate(data)]
            reps = []
            for _ in range(5):
                if name == "encode":
                    reps.append(_timed(functools.partial(_encode_all, c, data)))
                else:
                    reps.append(_timed(functools.partial(_decode_all, c, blobs)))
            cells.append(statistics.median(reps) / len(data) * 1e6)
        rows.append((f"codec {name} (\u00b5s/note)", cells[0], cells[1], f"{cells[1] / cells[0]:.0f}x"))
    return rows


def run(notes: int, size: int, rounds: int, fsync: bool) -> list[tuple[str, float, float, str]]:
    rng = random.Random(7)
    bodies = [_text(rng, size) for _ in range(notes)]
    edits = [b[: size // 2] + " edited " + b[size // 2 :] for b in bodies]
    results: dict[str, dict[str, list[float]]] = {"plain": {}, "encrypted": {}}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-enc-") as tmp:
        os.environ.setdefault("GITMEM_MASTER_KEY", "bench-master-key-0123456789abcdefghijklmnop")
        gm = Gitmem.open(Path(tmp) / "home", fsync="always" if fsync else "never")
        ws = gm.catalog.create_workspace("bench")
        for r in range(rounds):
            kinds = ["plain", "encrypted"] if r % 2 == 0 else ["encrypted", "plain"]  # alternate who goes first
            for kind in kinds:
                info = gm.create_store(ws.id, f"{kind}-{r}", encrypted=kind == "encrypted")
                store: MemoryStore = gm.store(ws.id, info.id)
                ids: list[str] = []
                cell = results[kind]

                def create(store: MemoryStore = store, ids: list[str] = ids) -> None:
                    ids.extend(store.create(f"/bench/n{i:05}.md", bodies[i], actor=ACTOR).id for i in range(notes))

                def update(store: MemoryStore = store, ids: list[str] = ids) -> None:
                    for memory_id, text in zip(ids, edits, strict=True):
                        store.update(memory_id, content=text, actor=ACTOR)

                def read(store: MemoryStore = store, ids: list[str] = ids) -> None:
                    for memory_id in ids:
                        store.get(memory_id, with_content=True)

                def listing(store: MemoryStore = store) -> None:
                    for _ in range(5):
                        page = None
                        while True:
                            result = store.list(limit=20, page=page, with_content=True)
                            page = result.next_page
                            if page is None:
                                break

                def reopen(info_id: str = info.id, ids: list[str] = ids) -> None:
                    gm._forget(info_id)
                    gm.store(ws.id, info_id).get(ids[0], with_content=True)

                for name, fn in (
                    ("create", create),
                    ("update", update),
                    ("read", read),
                    ("list (view=full)", listing),
                    ("open store", reopen),
                ):
                    cell.setdefault(name, []).append(_timed(fn))
                if r == 0:
                    sizes[kind] = _packed_bytes(gm.repo_path(info.id))
    rows = _codec_rows(bodies)
    per_op = {"create": notes, "update": notes, "read": notes, "list (view=full)": 5 * notes, "open store": 1}
    for name, count in per_op.items():
        plain = statistics.median(results["plain"][name]) / count * 1e6
        enc = statistics.median(results["encrypted"][name]) / count * 1e6
        rows.append((f"{name} (\u00b5s/note)" if count > 1 else f"{name} (\u00b5s)", plain, enc, f"{enc / plain:.2f}x"))
    rows.append(
        (
            "packed size (KiB)",
            sizes["plain"] / 1024,
            sizes["encrypted"] / 1024,
            f"{sizes['encrypted'] / sizes['plain']:.2f}x",
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.encryption", description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=200)
    parser.add_argument("--size", type=int, default=2048, help="bytes of text a note")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fsync", choices=["always", "never"], default="always")
    args = parser.parse_args()
    rows = run(args.notes, args.size, args.rounds, args.fsync == "always")
    print(
        f"encryption at rest: {args.notes} notes of {args.size} bytes, median of {args.rounds} rounds,"
        f" fsync={args.fsync}"
    )
    header = ("operation", "plain", "encrypted", "ratio")
    widths = [max(len(header[0]), *(len(r[0]) for r in rows)), 12, 12, 8]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True))))
    print("  ".join("-" * w for w in widths))
    for name, plain, enc, ratio in rows:
        print(f"{name.ljust(widths[0])}  {plain:12.1f}  {enc:12.1f}  {ratio:>8}")


if __name__ == "__main__":
    main()

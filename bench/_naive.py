"""The naive server ``bench.http`` measures gitmem against: the simplest server that could do the job.

A minimal FastAPI app on the same uvicorn (same loop and HTTP parser as ``gitmem serve``) with the same
routes and bodies as gitmem's memories API, so one client drives both. A note is a file, written,
flushed and renamed into place, plus a SQLite row, all under one lock; there are no versions, no
history and no access rules beyond comparing the API key. GET reads the file; a listing reads rows.

Run as ``NAIVE_DIR=... NAIVE_KEY=... python -m bench._naive PORT``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Header, HTTPException, Query
from pydantic import BaseModel

ROOT = Path(os.environ.get("NAIVE_DIR", "naive-data"))
KEY = os.environ.get("NAIVE_KEY", "")
ROOT.mkdir(parents=True, exist_ok=True)

_lock = threading.Lock()
_db = sqlite3.connect(ROOT / "index.sqlite3", check_same_thread=False, isolation_level=None)
_db.execute("PRAGMA journal_mode=WAL")
_db.execute(
    "CREATE TABLE IF NOT EXISTS notes (store TEXT, id TEXT, path TEXT, size INTEGER, PRIMARY KEY (store, path))"
)

_local = threading.local()
app = FastAPI()


def _reader() -> sqlite3.Connection:
    """Readers get a connection each: WAL lets them read while the writer holds the lock."""
    conn = getattr(_local, "db", None)
    if conn is None:
        conn = _local.db = sqlite3.connect(ROOT / "index.sqlite3", isolation_level=None)
    return conn


class NoteIn(BaseModel):
    path: str
    content: str


class StoreIn(BaseModel):
    name: str


def _auth(key: str | None) -> None:
    if key != KEY:
        raise HTTPException(401, "invalid API key")


def _note_file(store: str, note_id: str) -> Path:
    return ROOT / store / f"{note_id}.md"


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/v1/memory_stores")
def create_store(body: StoreIn, x_api_key: str | None = Header(None)) -> dict[str, str]:
    _auth(x_api_key)
    store = "st_" + uuid.uuid4().hex
    (ROOT / store).mkdir()
    return {"id": store, "name": body.name}


@app.post("/v1/memory_stores/{store}/memories")
def create_note(store: str, body: NoteIn, x_api_key: str | None = Header(None)) -> dict[str, Any]:
    _auth(x_api_key)
    note_id = "mem_" + uuid.uuid4().hex
    final = _note_file(store, note_id)
    temp = final.with_suffix(".tmp")
    data = body.content.encode()
    with _lock:
        try:
            _db.execute("INSERT INTO notes VALUES (?,?,?,?)", (store, note_id, body.path, len(data)))
        except sqlite3.IntegrityError:
            raise HTTPException(409, "a note exists at this path") from None
        with open(temp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, final)
    return {"id": note_id, "path": body.path, "type": "memory"}


@app.get("/v1/memory_stores/{store}/memories/{note_id}")
def get_note(store: str, note_id: str, x_api_key: str | None = Header(None)) -> dict[str, Any]:
    _auth(x_api_key)
    try:
        content = _note_file(store, note_id).read_text()
    except (FileNotFoundError, OSError):
        raise HTTPException(404, "not found") from None
    return {"id": note_id, "content": content, "type": "memory"}


@app.get("/v1/memory_stores/{store}/memories")
def list_notes(
    store: str, limit: int = Query(20, le=1000), page: str | None = None, x_api_key: str | None = Header(None)
) -> dict[str, Any]:
    _auth(x_api_key)
    rows = (
        _reader()
        .execute(
            "SELECT id, path, size FROM notes WHERE store=? AND path>? ORDER BY path LIMIT ?",
            (store, page or "", limit + 1),
        )
        .fetchall()
    )
    data = [{"id": i, "path": p, "content_size_bytes": s, "type": "memory"} for i, p, s in rows[:limit]]
    return {"data": data, "next_page": rows[limit - 1][1] if len(rows) > limit else None}


if __name__ == "__main__":  # python -m bench._naive PORT: uvicorn exactly as `gitmem serve` runs it
    import sys

    import uvicorn

    from gitmem.cli.node.serve import uvicorn_options

    level = os.environ.get("GITMEM_LOG_LEVEL", "INFO")  # the same as gitmem's (bench.http: WARNING)
    uvicorn.run("bench._naive:app", host="127.0.0.1", port=int(sys.argv[1]), **uvicorn_options("text", level))

"""What the web view's templates need beyond the engine: safe Markdown, names for actors, diff rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup, escape

from gitmem.engine.store.diff import Hunk
from gitmem.errors import NotFound
from gitmem.model import Actor
from gitmem.parts import Parts


class _SafeRenderer(RendererHTML):
    """Raw HTML is off (it comes out as text); an image is shown only if it is inline data (``data:``),
    never fetched from elsewhere: a remote image would tell its server who reads the note, and when."""

    def image(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        if src.lower().startswith("data:image/"):
            return super().image(tokens, idx, options, env)
        alt = self.renderInlineAsText(token.children or [], options, env)
        return f'<span class="image-dropped">[image not shown: {escape(alt or "no description")}]</span>'

    def heading_open(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return self._shifted(tokens, idx, options, env)

    def heading_close(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return self._shifted(tokens, idx, options, env)

    def _shifted(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        """A note's headings sit one level under the page's own (a page has one h1)."""
        tokens[idx].tag = f"h{min(6, int(tokens[idx].tag[1]) + 1)}"
        return self.renderToken(tokens, idx, options, env)

    def link_open(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        return self.renderToken(tokens, idx, options, env)


_markdown = (
    MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}, renderer_cls=_SafeRenderer)
    .enable("table")
    .enable("strikethrough")
)


def markdown(text: str) -> Markup:
    """Note content as HTML. markdown-it also refuses javascript:, vbscript: and file: links."""
    return Markup(_markdown.render(text))  # escaped by the renderer: html is off  # noqa: S704  escaped by the renderer: html is off


class Names:
    """Who an actor is, in words a person reads: the key's or user's name, a task's worker, where
    gitmem knows them (a deleted one shows its id)."""

    def __init__(self, parts: Parts, workspace_id: str) -> None:
        self.catalog = parts.gm.catalog
        self.parts = parts
        self.workspace_id = workspace_id
        self._cache: dict[str, str] = {}

    def _task_label(self, task_id: str) -> str:
        tasks = self.parts.tasks
        try:
            worker = tasks.get_worker(self.workspace_id, tasks.get_task(self.workspace_id, task_id).worker_id)
        except NotFound:
            return f"{task_id} (task)"
        return f"{task_id} (task of {worker.name})"

    def __call__(self, actor: Actor | None) -> str:
        if actor is None:
            return "gitmem (service)"
        if actor.type == "service_account_actor":
            return f"service {actor.id}"
        if actor.id not in self._cache:
            if actor.type == "task_actor":
                self._cache[actor.id] = self._task_label(actor.id)
            else:
                kind = {"user_actor": "user", "api_actor": "key"}.get(actor.type, actor.type)
                try:
                    name = self.catalog.credential(actor.id).name
                except NotFound:
                    name = actor.id
                self._cache[actor.id] = f"{name} ({kind})"
        return self._cache[actor.id]


@dataclass(frozen=True)
class SideBySide:
    """A row of a side-by-side diff: the old line (number, text) and the new one, either may be empty."""

    old_no: int | None
    old: str | None
    new_no: int | None
    new: str | None
    kind: str  # context | changed | removed | added


def side_by_side(hunk: Hunk) -> list[SideBySide]:
    """Pair each run of removed lines with the run of added lines after it."""
    rows: list[SideBySide] = []
    old_no, new_no = hunk.old_start, hunk.new_start
    removed: list[tuple[int, str]] = []
    added: list[tuple[int, str]] = []

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            o = removed[i] if i < len(removed) else (None, None)
            n = added[i] if i < len(added) else (None, None)
            kind = "changed" if o[1] is not None and n[1] is not None else ("removed" if o[1] is not None else "added")
            rows.append(SideBySide(o[0], o[1], n[0], n[1], kind))
        removed.clear()
        added.clear()

    for line in hunk.lines:
        if line.kind == "removed":
            if added:
                flush()
            removed.append((old_no, line.text))
            old_no += 1
        elif line.kind == "added":
            added.append((new_no, line.text))
            new_no += 1
        else:
            flush()
            rows.append(SideBySide(old_no, line.text, new_no, line.text, "context"))
            old_no += 1
            new_no += 1
    flush()
    return rows


def when(value: dt.datetime | None) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


def size(value: int | None) -> str:
    if value is None:
        return ""
    for unit in ("B", "KiB", "MiB"):
        if value < 1024 or unit == "MiB":
            return f"{value} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024  # type: ignore[assignment]
    return str(value)


def template_globals() -> dict[str, Any]:
    return {"when": when, "size": size, "markdown": markdown, "side_by_side": side_by_side}

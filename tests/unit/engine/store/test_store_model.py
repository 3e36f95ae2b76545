"""Property test: the engine and a plain dict model, driven by the same random operations, agree.

Paths come from a small alphabet chosen so that notes collide (at, above and below one another) and
renames move notes into and out of each other's folders. After every step the notes (ids, paths,
contents, hashes), the versions (count, order, operations per note) and the error types must match,
and the tree on ``main`` must hold exactly the model's notes. At the end a rebuilt index answers as the
incremental one did and ``git fsck`` is clean.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pygit2
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import GitmemError, NotFound, PathConflict, PreconditionFailed
from gitmem.git.repository import read_tip
from tests.checks import assert_fsck_clean, blob, index_snapshot, listed_notes
from tests.checks import tree as tree_of

PATHS = ["/a", "/a/b", "/a/b/c", "/a/c", "/b", "/ab", "/b/a", "/A"]
CONTENTS = ["", "x", "y", "hello world", "x" * 3]
PRECONDITIONS = [None, "right sha", "wrong sha", "right blob", "wrong blob"]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def blob_id(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class Model:
    notes: dict[str, tuple[str, str]] = field(default_factory=dict)  # memory id -> (path, content)
    versions: list[tuple[str, str, str, str | None]] = field(default_factory=list)  # id, op, path, sha

    def at(self, path: str) -> str | None:
        return next((m for m, (p, _) in self.notes.items() if p == path), None)

    def clash(self, path: str, moving: str | None) -> tuple[str, str] | None:
        """The note a write to ``path`` collides with, found in the engine's order: the path itself,
        then the folders above it from the top, then the first note below it in path order (the moving
        note itself may sit below its new path and collides with nothing)."""
        parts = path[1:].split("/")
        candidates = [path] + ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
        exact = next(((found, c) for c in candidates if (found := self.at(c)) is not None), None)
        if exact is None:
            below = sorted((p, m) for m, (p, _) in self.notes.items() if p.startswith(path + "/") and m != moving)
            exact = (below[0][1], below[0][0]) if below else None
        if exact is not None and exact[0] != moving:
            return exact
        return self.case_twin(path, moving)

    def case_twin(self, path: str, moving: str | None) -> tuple[str, str] | None:
        """The first note (in path order) that differs from ``path``, at a folder above it or at itself,
        only in case: ``/A`` for ``/a``, ``/a/b`` for ``/A/c``."""
        parts = path[1:].split("/")
        for level in ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]:
            for other, memory_id in sorted((p, m) for m, (p, _) in self.notes.items() if m != moving):
                head, rest = other[: len(level)], other[len(level) :]
                if head != level and head.casefold() == level.casefold() and rest[:1] in ("", "/"):
                    return memory_id, other
        return None


def expected_for(check: str | None, content: str) -> dict[str, Any]:
    return {
        None: {},
        "right sha": {"expected_sha256": sha256(content)},
        "wrong sha": {"expected_sha256": sha256(content + "!")},
        "right blob": {"expected_blob_id": blob_id(content)},
        "wrong blob": {"expected_blob_id": blob_id(content + "!")},
    }[check]


class StoreMachine(RuleBasedStateMachine):
    def __init__(self, gm: Gitmem, workspace_id: str) -> None:
        super().__init__()
        self.store: MemoryStore = gm.store(workspace_id, gm.create_store(workspace_id, "model").id)
        self.model = Model()
        self.known: list[str] = []  # every id ever made, deleted ones too (they must be NotFound)

    # -- operations -------------------------------------------------------------------------------

    def outcome(self, call, expected_error: type[GitmemError] | None):  # type: ignore[no-untyped-def]
        try:
            result = call()
        except GitmemError as error:
            assert expected_error is not None, f"unexpected {type(error).__name__}: {error.message}"  # noqa: PT017  the model says whether this call fails
            assert type(error) is expected_error, f"{type(error).__name__} but the model expects {expected_error}"  # noqa: PT017  (the same)
            return error
        assert expected_error is None, f"the model expects {expected_error.__name__}, the engine accepted"
        return result

    def check_clash(self, error: GitmemError, clash: tuple[str, str]) -> None:
        assert error.details == {"conflicting_memory_id": clash[0], "conflicting_path": clash[1]}

    @rule(path=st.sampled_from(PATHS), content=st.sampled_from(CONTENTS))
    def create(self, path: str, content: str) -> None:
        clash = self.model.clash(path, moving=None)
        result = self.outcome(lambda: self.store.create(path, content), PathConflict if clash else None)
        if clash:
            self.check_clash(result, clash)
            return
        assert result.path == path and result.content_sha256 == sha256(content)
        assert result.id not in self.known
        self.known.append(result.id)
        self.model.notes[result.id] = (path, content)
        self.model.versions.append((result.id, "created", path, sha256(content)))

    @precondition(lambda self: self.known)
    @rule(
        which=st.integers(0, 63),
        content=st.none() | st.sampled_from(CONTENTS),
        path=st.none() | st.sampled_from(PATHS),
        check=st.sampled_from(PRECONDITIONS),
    )
    def update(self, which: int, content: str | None, path: str | None, check: str | None) -> None:
        memory_id = self.known[which % len(self.known)]
        current = self.model.notes.get(memory_id)
        kwargs = expected_for(check, current[1] if current else "gone")
        call = lambda: self.store.update(memory_id, content=content, path=path, **kwargs)  # noqa: E731
        if current is None:
            self.outcome(call, NotFound)
            return
        old_path, old_content = current
        new_path = path if path is not None else old_path
        new_content = content if content is not None else old_content
        if (new_path, sha256(new_content)) == (old_path, sha256(old_content)):
            before = len(self.store.versions(limit=100).items)
            note = self.outcome(call, None)  # already so: no version, whatever the precondition says
            assert (note.id, note.path, note.content_sha256) == (memory_id, old_path, sha256(old_content))
            assert len(self.store.versions(limit=100).items) == before
            return
        if check in ("wrong sha", "wrong blob"):
            self.outcome(call, PreconditionFailed)
            return
        clash = self.model.clash(new_path, moving=memory_id) if new_path != old_path else None
        result = self.outcome(call, PathConflict if clash else None)
        if clash:
            self.check_clash(result, clash)
            return
        assert (result.id, result.path, result.content_sha256) == (memory_id, new_path, sha256(new_content))
        self.model.notes[memory_id] = (new_path, new_content)
        self.model.versions.append((memory_id, "modified", new_path, sha256(new_content)))

    @precondition(lambda self: self.known)
    @rule(which=st.integers(0, 63), check=st.sampled_from(PRECONDITIONS))
    def delete(self, which: int, check: str | None) -> None:
        memory_id = self.known[which % len(self.known)]
        current = self.model.notes.get(memory_id)
        kwargs = expected_for(check, current[1] if current else "gone")
        call = lambda: self.store.delete(memory_id, **kwargs)  # noqa: E731
        if current is None:
            self.outcome(call, NotFound)
        elif check in ("wrong sha", "wrong blob"):
            self.outcome(call, PreconditionFailed)
        else:
            version = self.outcome(call, None)
            assert (version.memory_id, version.operation, version.path) == (memory_id, "deleted", current[0])
            del self.model.notes[memory_id]
            self.model.versions.append((memory_id, "deleted", current[0], None))

    # -- agreement ----------------------------------------------------------------------------------

    @invariant()
    def notes_agree(self) -> None:
        listed = listed_notes(self.store.list(limit=1000, with_content=False).items)
        expected = sorted((p, m, sha256(c)) for m, (p, c) in self.model.notes.items())
        assert [(n.path, n.id, n.content_sha256) for n in listed] == expected
        for memory_id, (path, content) in self.model.notes.items():
            note = self.store.get(memory_id)
            assert (note.path, note.content, note.blob_id) == (path, content, blob_id(content))
        assert self.tree_on_main() == {p: c for p, c in self.model.notes.values()}
        contents = [c.encode() for _, c in self.model.notes.values()]
        assert self.store.index.totals() == (len(contents), sum(map(len, contents)))

    @invariant()
    def versions_agree(self) -> None:
        versions, page = [], None
        while True:
            result = self.store.versions(limit=100, page=page)
            versions += result.items
            page = result.next_page
            if page is None:
                break
        assert [(v.memory_id, v.operation, v.path, v.content_sha256) for v in reversed(versions)] == self.model.versions

    def versions_per_note_agree(self) -> None:
        for memory_id in self.known:
            mine = [(op, path) for m, op, path, _ in self.model.versions if m == memory_id]
            assert [(v.operation, v.path) for v in reversed(self.store.versions(memory_id=memory_id).items)] == mine[
                -20:
            ]

    def tree_on_main(self) -> dict[str, str]:
        tip = read_tip(self.store.repo)
        files: dict[str, str] = {}

        def walk(tree: pygit2.Tree, prefix: str) -> None:
            for entry in tree:
                name = entry.name
                assert name is not None
                if entry.type_str == "tree":
                    walk(tree_of(self.store.repo[entry.id]), prefix + name + "/")
                else:
                    files[prefix + name] = blob(self.store.repo[entry.id]).data.decode()

        if tip is not None:
            walk(self.store.repo[tip].tree, "/")
        return files

    def teardown(self) -> None:
        try:
            self.store.index.catch_up()
            incremental = index_snapshot(self.store)
            self.store.index.rebuild()
            assert index_snapshot(self.store) == incremental
            self.notes_agree()
            self.versions_agree()
            self.versions_per_note_agree()
            assert_fsck_clean(self.store.path)
        finally:
            self.store.close()


def test_the_engine_agrees_with_a_dict_model(fast_gm: Gitmem) -> None:
    workspace = fast_gm.catalog.create_workspace("model")
    run_state_machine_as_test(
        # hypothesis types the factory as the machine's class; it calls whatever factory it is given
        lambda: StoreMachine(fast_gm, workspace.id),  # type: ignore[arg-type]
        settings=settings(
            max_examples=50,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )

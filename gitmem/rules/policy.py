"""What a store allows: a memory store or a profile bank, one table each."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gitmem.errors import InvalidRequest, LimitExceeded, TooLarge
from gitmem.model import StoreKind
from gitmem.rules import paths
from gitmem.rules.filters import FilterChain

MAX_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 1024
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
MAX_SHARED_STORES = 1000
PATH_FIELD = "a note's path"  # how a refusal names a path that holds a secret (never the path itself)


@dataclass(frozen=True)
class StorePolicy:
    max_content_bytes: int
    max_notes: int
    max_total_bytes: int | None
    validate_path: paths.PathValidator
    filters: FilterChain = field(default_factory=FilterChain)

    def check_path(self, path: str) -> None:
        """A note's path is valid for this store and holds no secret (a path is stored like a body)."""
        self.filters.check_caller_text(PATH_FIELD, path)  # first: an invalid path's refusal quotes it
        self.validate_path(path)

    def check_content(self, path: str, content: str) -> bytes:
        if not isinstance(content, str):
            raise InvalidRequest("content must be a string")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidRequest(f"content is not valid UTF-8: {exc.reason}") from None
        if len(data) > self.max_content_bytes:
            raise TooLarge(f"content of {path} is {len(data)} bytes; at most {self.max_content_bytes} are allowed")
        self.filters.check(path, content)
        return data

    def check_counts(self, notes_after: int, total_bytes_after: int) -> None:
        if notes_after > self.max_notes:
            raise LimitExceeded(f"a store holds at most {self.max_notes} notes")
        if self.max_total_bytes is not None and total_bytes_after > self.max_total_bytes:
            raise LimitExceeded(f"a bank holds at most {self.max_total_bytes} bytes of notes")


MEMORY_STORE = StorePolicy(
    max_content_bytes=102_400, max_notes=10_000, max_total_bytes=None, validate_path=paths.validate_store_path
)


def _bank_path(path: str) -> str:
    # A bank's entry "projects/acme.md" is the note "/projects/acme.md": check the relative form.
    if not isinstance(path, str) or not path.startswith("/"):
        raise InvalidRequest(f"invalid path {path!r}: a bank note's path starts with '/'")
    paths.validate_bank_path(path[1:])
    return path


PROFILE_BANK = StorePolicy(
    max_content_bytes=64 * 1024, max_notes=100, max_total_bytes=5 * 1024 * 1024, validate_path=_bank_path
)


def policy_for(kind: StoreKind, filters: FilterChain | None = None) -> StorePolicy:
    base = PROFILE_BANK if kind == "bank" else MEMORY_STORE
    if filters is None:
        return base
    return StorePolicy(base.max_content_bytes, base.max_notes, base.max_total_bytes, base.validate_path, filters)


def has_lone_surrogate(value: object) -> bool:
    """True if a string anywhere in ``value`` (nested dicts, lists) holds a lone surrogate: JSON's
    ``"\\udc80"`` decodes to one, and no UTF-8 file, SQLite text or Git object can store it."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, Mapping):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_lone_surrogate(v) for v in value)
    return False


def check_text(value: object, what: str) -> None:
    """Refuse text that cannot be stored as UTF-8 (a lone surrogate), naming the field, not the value."""
    if has_lone_surrogate(value):
        raise InvalidRequest(f"{what} is not valid Unicode: it holds a lone surrogate")


def _has_control(text: str) -> bool:
    return any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in text)


def check_store_fields(
    name: str | None, description: str | None, metadata: dict[str, str] | None, *, filters: FilterChain
) -> None:
    """Rules for a store's name, description and (resulting) metadata (also a worker's or profile's name)."""
    check_text(name, "name")
    check_text(description, "description")
    check_text(metadata, "metadata")
    if name is not None:
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_CHARS:
            raise InvalidRequest(f"name must be 1 to {MAX_NAME_CHARS} characters")
        if _has_control(name):
            raise InvalidRequest("name must not contain control characters")
    if description is not None and len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidRequest(f"description must be at most {MAX_DESCRIPTION_CHARS} characters")
    if metadata is not None:
        if len(metadata) > MAX_METADATA_PAIRS:
            raise InvalidRequest(f"metadata holds at most {MAX_METADATA_PAIRS} pairs")
        for key, value in metadata.items():
            if not 1 <= len(key) <= MAX_METADATA_KEY_CHARS:
                raise InvalidRequest(f"metadata keys must be 1 to {MAX_METADATA_KEY_CHARS} characters")
            if not isinstance(value, str) or len(value) > MAX_METADATA_VALUE_CHARS:
                raise InvalidRequest(
                    f"metadata values must be strings of at most {MAX_METADATA_VALUE_CHARS} characters"
                )
    filters.check_caller_text("the name", name)
    filters.check_caller_text("the description", description)
    filters.check_caller_text("the metadata", metadata)

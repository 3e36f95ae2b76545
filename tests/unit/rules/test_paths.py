"""Path rules (docs/architecture.md): memory stores and profile banks."""

from __future__ import annotations

import pytest

from gitmem.errors import InvalidRequest
from gitmem.rules import paths
from gitmem.rules.policy import PROFILE_BANK

# -- memory stores ------------------------------------------------------------------------------------

GOOD_STORE_PATHS = [
    "/a",
    "/people/sam.md",
    "/Notes/ToDo.MD",
    "/with space/and, punctuation!.txt",
    "/日本語/メモ.md",
    "/caf\u00e9.md",  # NFC
    "/emoji/\U0001f600.md",
    "/...",  # dots that are not '.' or '..'
    "/a/.hidden",
    "/.github/workflows/ci.yml",  # '.github' is not '.git'
    "/gitattributes",
    "/a/.gitattributes",  # only the top-level one is Git's
    "/a/.gitmodules",
    "/" + "x" * 1023,  # exactly 1,024 bytes
    "/" + "\u00e9" * 511 + "x",  # 1 + 1,022 + 1 = 1,024 UTF-8 bytes
    "/" + "/".join("s" * 20),  # 20 segments
]


@pytest.mark.parametrize("path", GOOD_STORE_PATHS)
def test_store_paths_that_are_allowed(path: str) -> None:
    assert paths.validate_store_path(path) == path


BAD_STORE_PATHS = {
    "empty": "",
    "relative": "people/sam.md",
    "no leading slash, dot": "./a",
    "root alone": "/",
    "double slash at start": "//a",
    "empty middle segment": "/a//b",
    "trailing slash": "/a/",
    "dot segment": "/./a",
    "dot-dot segment": "/a/../b",
    "ends in dot-dot": "/a/..",
    "ends in dot": "/a/.",
    "1,025 bytes": "/" + "x" * 1024,
    "1,025 bytes of multibyte": "/" + "\u00e9" * 512,
    "21 segments": "/" + "/".join("s" * 21),
    "NUL": "/a\x00b",
    "newline": "/a\nb",
    "tab": "/a\tb",
    "DEL": "/a\x7fb",
    "C1 control NEL": "/a\x85b",
    "zero-width space": "/a\u200bb",
    "zero-width joiner": "/a\u200db",
    "zero-width non-joiner hiding .git": "/.g\u200cit",
    "byte order mark": "/\ufeffa",
    "right-to-left override": "/a\u202eb.md",
    "line separator U+2028": "/a\u2028b",
    "paragraph separator U+2029": "/a\u2029b",
    "lone surrogate": "/a\ud800",
    "NFD": "/cafe\u0301.md",
    ".git": "/.git",
    ".git folder": "/.git/config",
    ".GIT": "/.GIT",
    ".Git mixed case": "/a/.Git/x",
    ".git.": "/.git.",
    ".git with trailing spaces and dots": "/a/.git . .",
    "git~1": "/git~1",
    "GIT~1 deeper": "/a/GIT~1/b",
    ".git NTFS stream": "/.git::$INDEX_ALLOCATION/x",
    ".git: stream": "/a/.git:x",
    ".git behind a backslash": "/a/x\\.git",
    ".git before a backslash": "/.git\\config",
    "top-level .gitattributes": "/.gitattributes",
    "top-level .gitmodules": "/.gitmodules",
    "top-level .GITMODULES": "/.GITMODULES",
    "top-level .gitmodules.": "/.gitmodules.",
    "top-level .gitattributes as a folder": "/.gitattributes/x",
    # One rule with the memory tool: what some layer reads as a separator or a dot segment.
    "backslash": "/a\\b",
    "fullwidth solidus": "/a\uff0fb",
    "division slash": "/a\u2215b",
    "fullwidth reverse solidus": "/a\uff3cb",
    "fullwidth dot-dot": "/\uff0e\uff0e/x",
    "one-dot leader pair": "/a/\u2024\u2024",
}


@pytest.mark.parametrize("path", list(BAD_STORE_PATHS.values()), ids=list(BAD_STORE_PATHS))
def test_store_paths_that_are_refused(path: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        paths.validate_store_path(path)
    assert refused.value.status == 400
    assert refused.value.api_type == "invalid_request_error"
    assert "invalid path" in refused.value.message


def test_refusals_say_why() -> None:
    def why(path: str) -> str:
        with pytest.raises(InvalidRequest) as refused:
            paths.validate_store_path(path)
        return refused.value.message

    assert "start with '/'" in why("a")
    assert "1024 UTF-8 bytes" in why("/" + "x" * 1024)
    assert "more than 20 segments" in why("/" + "/".join("s" * 21))
    assert "empty, '.' or '..'" in why("/a/../b")
    assert "U+2028" in why("/a\u2028b")
    assert "U+0000" in why("/a\x00")
    assert "Normalization Form C" in why("/cafe\u0301")
    assert "Git reserves" in why("/.GIT")
    assert "Git reserves" in why("/.gitmodules")


def test_non_strings_are_refused() -> None:
    for value in (None, 7, b"/a"):
        with pytest.raises(InvalidRequest):
            paths.validate_store_path(value)  # type: ignore[arg-type]


def test_paths_are_case_sensitive_and_byte_exact() -> None:
    assert paths.validate_store_path("/Notes") != paths.validate_store_path("/notes")
    assert paths.git_path("/People/Sam.md") == "People/Sam.md"
    assert paths.api_path("People/Sam.md") == "/People/Sam.md"


def test_ancestors() -> None:
    assert paths.ancestors("/a") == []
    assert paths.ancestors("/a/b/c.md") == ["/a", "/a/b"]


@pytest.mark.parametrize("prefix", ["/", "/notes/", "/a/b/", "/日本語/"])
def test_listing_prefixes_that_are_allowed(prefix: str) -> None:
    assert paths.validate_prefix(prefix) == prefix


@pytest.mark.parametrize("prefix", ["", "notes/", "/notes", "//", "/a//", "/../", "/.git/", "/a\u2028/"])
def test_listing_prefixes_that_are_refused(prefix: str) -> None:
    with pytest.raises(InvalidRequest):
        paths.validate_prefix(prefix)


# -- profile banks ------------------------------------------------------------------------------------

GOOD_BANK_PATHS = ["a", "projects/acme.md", "A-Z_a.z-0_9", "a/b/c/d/e", "x" * 256, "a/b.c/d"]


@pytest.mark.parametrize("path", GOOD_BANK_PATHS)
def test_bank_paths_that_are_allowed(path: str) -> None:
    assert paths.validate_bank_path(path) == path
    assert paths.bank_to_store_path(path) == "/" + path
    assert paths.store_to_bank_path("/" + path) == path
    assert PROFILE_BANK.validate_path("/" + path) == "/" + path


BAD_BANK_PATHS = {
    "empty": "",
    "absolute": "/a",
    "dot-dot": "a/../b",
    "dot-dot alone": "..",
    "leading-dot segment": "a/.hidden",
    "leading-dot first segment": ".git/config",
    "dot segment": "a/./b",
    "empty segment": "a//b",
    "trailing slash": "a/",
    "six segments": "a/b/c/d/e/f",
    "257 characters": "x" * 257,
    "space": "a b",
    "unicode": "café",
    "colon": "a:b",
    "backslash": "a\\b",
    "tilde": "git~1",
    "newline": "a\nb",
}


@pytest.mark.parametrize("path", list(BAD_BANK_PATHS.values()), ids=list(BAD_BANK_PATHS))
def test_bank_paths_that_are_refused(path: str) -> None:
    with pytest.raises(InvalidRequest):
        paths.validate_bank_path(path)


def test_a_bank_note_path_is_the_relative_path_under_a_slash() -> None:
    with pytest.raises(InvalidRequest):
        PROFILE_BANK.validate_path("projects/acme.md")  # the store form starts with '/'
    with pytest.raises(InvalidRequest):
        PROFILE_BANK.validate_path("/projects/.env")

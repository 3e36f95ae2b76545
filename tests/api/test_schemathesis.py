"""Property-based conformance: schemathesis drives every operation of the app's /openapi.json (the real
app, served in this process through ASGI) and checks for 500s and for responses that break the schema
(status, content type, body). ``GITMEM_SCHEMATHESIS_EXAMPLES`` raises the examples per operation for a
longer hunt."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gitmem.api.app import create_app
from tests.apps import QUIET, InProcess, in_process, make_test_home

# Per operation and generation mode. Every operation still sees both modes; a longer hunt is one
# environment variable away.
MAX_EXAMPLES = int(os.environ.get("GITMEM_SCHEMATHESIS_EXAMPLES", "5"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

_serial = itertools.count()


@dataclass(frozen=True)
class Live:
    server: InProcess
    secret: str
    store_id: str

    def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        with self.server.http(self.secret) as http:
            response: httpx.Response = http.request(method, path, **kwargs)
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = make_test_home(tmp_path_factory.mktemp("gitmem-home"), workspace="fuzz", fsync="never")
    with in_process(home.path) as server, server.http(home.admin) as http:
        store = http.post("/v1/memory_stores", json={"name": "fuzzed"}).json()
        yield Live(server, home.admin, store["id"])


def _aim(case: schemathesis.Case[Any], live: Live) -> None:
    """Point generated ids at real objects, so operations get past 404 and into the engine."""
    params = case.path_parameters
    if not params or "memory_store_id" not in params:
        return
    path, method = case.operation.path, case.method.upper()
    if (path == "/v1/memory_stores/{memory_store_id}" and method == "DELETE") or path.endswith("/archive"):
        # Give destructive operations a store of their own.
        params["memory_store_id"] = live.call("POST", "/v1/memory_stores", json={"name": "doomed"})["id"]
        return
    params["memory_store_id"] = live.store_id
    if "memory_id" in params or "memory_version_id" in params:
        note = live.call(
            "POST",
            f"/v1/memory_stores/{live.store_id}/memories",
            json={"path": f"/aimed/{next(_serial)}.md", "content": "aimed"},
        )
        if "memory_id" in params:
            params["memory_id"] = note["id"]
        if "memory_version_id" in params:
            params["memory_version_id"] = note["memory_version_id"]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_api_conforms_to_its_schema(live: Live, mode: GenerationMode) -> None:
    # The python API rather than schemathesis' pytest plugin: its lazy loader breaks on pytest 9.
    # An app of its own on the same home: schemathesis runs the lifespan of the app it is given.
    api_schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(live.server.gm, QUIET))
    failures: list[str] = []
    operations = 0
    for result in api_schema.get_all_operations():
        if isinstance(result, Err):
            raise result.err()
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
            database=None,
        )
        def exercise(case: schemathesis.Case[Any]) -> None:
            _aim(case, live)
            case.call_and_validate(headers={"x-api-key": live.secret}, checks=CHECKS)

        try:
            exercise()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE  # e.g. /healthz takes no input to get wrong
        except Exception as exc:  # collect every operation's failure, then fail once
            failures.append(f"{operation.method.upper()} {operation.path}: {type(exc).__name__}\n{exc}")
    assert operations >= 10
    assert not failures, "\n\n".join(failures)

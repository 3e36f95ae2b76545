"""Answering with a model that is already valid, without FastAPI's second pass over it.

For a sync handler with a ``response_model``, FastAPI validates the returned object again, in one more
worker-thread hop, before serialising it: for a listing of 1,000 notes that is most of the time spent
above the engine, and for a write it is a step after the commit that could still fail the answer. The
models here are built from engine values by the handler itself, so they are dumped once, as JSON, in
the handler's thread. Routes keep their ``response_model`` for the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import Response
from pydantic import BaseModel


def json_response(model: BaseModel, headers: Mapping[str, str] | None = None) -> Response:
    return Response(model.model_dump_json(by_alias=True), media_type="application/json", headers=headers)

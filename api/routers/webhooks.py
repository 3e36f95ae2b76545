"""``/v1/webhooks``: subscribe a URL to events, list, retrieve and delete subscriptions (admin keys only).

The signing secret (``whsec_...``) is in the answer to the create call only.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from gitmem.api.deps import Caller, Engine
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.engine.catalog.catalog import Principal
from gitmem.errors import PermissionDenied
from gitmem.webhooks.outbox import EVENT_TYPES, Webhook, webhooks_for
from gitmem.webhooks.targets import MAX_URL_LENGTH


def require_admin(principal: Caller) -> Principal:
    if principal.role != "admin":
        raise PermissionDenied("only an admin key may manage webhooks")
    return principal


router = APIRouter(
    prefix="/v1/webhooks", tags=["webhooks"], responses=ERROR_RESPONSES, dependencies=[Depends(require_admin)]
)


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(..., max_length=MAX_URL_LENGTH, examples=["https://example.com/gitmem-events"])
    event_types: list[str] = Field(..., min_length=1, examples=[list(EVENT_TYPES)])
    description: str = Field("", max_length=1024)


class WebhookOut(BaseModel):
    id: str
    type: Literal["webhook"] = "webhook"
    url: str
    event_types: list[str]
    description: str
    created_at: dt.datetime
    secret: str | None = Field(None, description="The signing secret: in the create call's answer only")

    @classmethod
    def of(cls, hook: Webhook) -> WebhookOut:
        return cls(
            id=hook.id,
            url=hook.url,
            event_types=list(hook.event_types),
            description=hook.description,
            created_at=hook.created_at,
            secret=hook.secret,
        )


class WebhookList(BaseModel):
    data: list[WebhookOut]
    next_page: str | None = None


class DeletedWebhook(BaseModel):
    id: str
    type: Literal["webhook_deleted"] = "webhook_deleted"


@router.post("", response_model=WebhookOut, response_model_exclude_none=True, summary="Create a webhook")
def create_webhook(body: WebhookCreate, principal: Caller, gm: Engine, request: Request) -> WebhookOut:
    allow = request.app.state.settings.webhook_policy.allow_networks  # GITMEM_WEBHOOK_ALLOW_NETWORKS
    hook = webhooks_for(gm).create(
        principal.workspace_id, body.url, body.event_types, body.description, allow_networks=allow
    )
    return WebhookOut.of(hook)


@router.get("", response_model=WebhookList, response_model_exclude_none=True, summary="List webhooks")
def list_webhooks(principal: Caller, gm: Engine) -> WebhookList:
    return WebhookList(data=[WebhookOut.of(h) for h in webhooks_for(gm).subscriptions(principal.workspace_id)])


@router.get("/{webhook_id}", response_model=WebhookOut, response_model_exclude_none=True, summary="Retrieve a webhook")
def retrieve_webhook(webhook_id: str, principal: Caller, gm: Engine) -> WebhookOut:
    return WebhookOut.of(webhooks_for(gm).get(principal.workspace_id, webhook_id))


@router.delete("/{webhook_id}", response_model=DeletedWebhook, summary="Delete a webhook")
def delete_webhook(webhook_id: str, principal: Caller, gm: Engine) -> DeletedWebhook:
    webhooks_for(gm).delete(principal.workspace_id, webhook_id)
    return DeletedWebhook(id=webhook_id)

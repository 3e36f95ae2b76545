"""``/v1/webhooks``: subscribe a URL to events, list, retrieve and delete subscriptions (admin keys only).

The signing secret (``whsec_...``) is in the answer to the create call only.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gitmem.api.deps import Caller, HomeParts
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.api.schemas.webhooks import DeletedWebhook, WebhookCreate, WebhookList, WebhookOut
from gitmem.engine.catalog.catalog import Principal
from gitmem.errors import PermissionDenied


def require_admin(principal: Caller) -> Principal:
    if principal.role != "admin":
        raise PermissionDenied("only an admin key may manage webhooks")
    return principal


router = APIRouter(
    prefix="/v1/webhooks", tags=["webhooks"], responses=ERROR_RESPONSES, dependencies=[Depends(require_admin)]
)


@router.post("", response_model=WebhookOut, response_model_exclude_none=True, summary="Create a webhook")
def create_webhook(body: WebhookCreate, principal: Caller, parts: HomeParts, request: Request) -> WebhookOut:
    allow = request.app.state.settings.webhook_policy.allow_networks  # GITMEM_WEBHOOK_ALLOW_NETWORKS
    hook = parts.webhooks.create(
        principal.workspace_id, body.url, body.event_types, body.description, allow_networks=allow
    )
    return WebhookOut.of(hook)


@router.get("", response_model=WebhookList, response_model_exclude_none=True, summary="List webhooks")
def list_webhooks(principal: Caller, parts: HomeParts) -> WebhookList:
    return WebhookList(data=[WebhookOut.of(h) for h in parts.webhooks.subscriptions(principal.workspace_id)])


@router.get("/{webhook_id}", response_model=WebhookOut, response_model_exclude_none=True, summary="Retrieve a webhook")
def retrieve_webhook(webhook_id: str, principal: Caller, parts: HomeParts) -> WebhookOut:
    return WebhookOut.of(parts.webhooks.get(principal.workspace_id, webhook_id))


@router.delete("/{webhook_id}", response_model=DeletedWebhook, summary="Delete a webhook")
def delete_webhook(webhook_id: str, principal: Caller, parts: HomeParts) -> DeletedWebhook:
    parts.webhooks.delete(principal.workspace_id, webhook_id)
    return DeletedWebhook(id=webhook_id)

"""``/v1/webhooks``: subscribe a URL to events, list, retrieve and delete subscriptions (admin keys only).

The signing secret (``whsec_...``) is in the answer to the create call only.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gitmem.api.deps import Caller, Engine
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.api.schemas.webhooks import DeletedWebhook, WebhookCreate, WebhookList, WebhookOut
from gitmem.engine.catalog.catalog import Principal
from gitmem.errors import PermissionDenied
from gitmem.webhooks.outbox import webhooks_for


def require_admin(principal: Caller) -> Principal:
    if principal.role != "admin":
        raise PermissionDenied("only an admin key may manage webhooks")
    return principal


router = APIRouter(
    prefix="/v1/webhooks", tags=["webhooks"], responses=ERROR_RESPONSES, dependencies=[Depends(require_admin)]
)


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

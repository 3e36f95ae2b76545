"""The wire shapes of ``/v1/webhooks``: a subscription in and out (its secret in the create call's answer
only), a page of them, a deletion."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gitmem.webhooks.outbox import EVENT_TYPES, Webhook
from gitmem.webhooks.targets import MAX_URL_LENGTH


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

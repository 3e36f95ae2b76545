"""Webhooks: subscriptions and the event outbox (:mod:`.outbox`), their tables and triggers
(:mod:`.tables`), and delivery (:mod:`.delivery`). Above the agents: the outbox watches dreams too.
"""

"""Webhooks: subscriptions and the event outbox (:mod:`.outbox`), their tables and triggers
(:mod:`.tables`), and delivery (:mod:`.delivery`: the rounds; :mod:`.sender`: one POST; :mod:`.targets`:
where a delivery may go). Above the agents: the outbox watches dreams too.
"""

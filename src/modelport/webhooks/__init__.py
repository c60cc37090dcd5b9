"""Signed webhooks: per-tenant signing secrets, a URL policy, and at-least-once
delivery with retries (Standard Webhooks). ``service.WebhookService`` is the entry
point; other services (jobs) call ``enqueue`` when something their caller asked to be
told about happens."""

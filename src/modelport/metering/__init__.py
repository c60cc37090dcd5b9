"""Metering: usage events, the outbox and the deduplicating ledger, the price book,
balances and reservations (reserve before work, settle after), and billing on top."""

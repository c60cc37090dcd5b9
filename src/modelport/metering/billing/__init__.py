"""Billing: invoices, credit notes, publisher statements, recompute and reconciliation."""

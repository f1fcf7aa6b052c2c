"""The ledger service: the only writer of money (a double-entry journal in PostgreSQL over gRPC).

``python -m socai_ledger`` runs it; ``socai_ledger.app.build_app`` wires it; docs/use/ledger.md
describes the API, the write batcher, idempotency, the outbox and the access policy.
"""

-- The read-only auditor role for docker compose (run once by the postgres image on an empty
-- data directory, before the migrations, which grant to it). DEVELOPMENT ONLY: the password is
-- public. In Kubernetes the CloudNativePG Cluster declares the same role
-- (deploy/k8s/postgres/cluster.yaml, managed.roles).
--
-- No pg_read_all_data: that reads every table, socai_table.hand_seeds included, and the seed
-- of a hand in play gives every card before it is dealt. The migrations grant this role
-- SELECT on what an audit reads and nothing else: socai_ledger.accounts, .transactions and
-- .entries (ledger_0003); socai_settlement.settlements, .settlement_seats and .dead_letters
-- (settlement_0003). Nothing in socai_table: the auditor reads a hand's seed from HandEnded.
-- default_transaction_read_only makes an accidental write fail even where a grant exists.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'socai_auditor') THEN
    CREATE ROLE socai_auditor LOGIN PASSWORD 'dev-auditor-db-password' CONNECTION LIMIT 4;
  END IF;
END
$$;
ALTER ROLE socai_auditor SET default_transaction_read_only = on;

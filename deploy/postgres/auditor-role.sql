-- The read-only auditor role for docker compose (run once by the postgres image on an empty
-- data directory). DEVELOPMENT ONLY: the password is public. In Kubernetes the CloudNativePG
-- Cluster declares the same role (deploy/k8s/postgres/cluster.yaml, managed.roles).
--
-- pg_read_all_data: SELECT on every table, view and sequence, now and in future schemas;
-- default_transaction_read_only makes an accidental write fail even where a grant exists.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'socai_auditor') THEN
    CREATE ROLE socai_auditor LOGIN PASSWORD 'dev-auditor-db-password' CONNECTION LIMIT 4;
  END IF;
END
$$;
GRANT pg_read_all_data TO socai_auditor;
ALTER ROLE socai_auditor SET default_transaction_read_only = on;

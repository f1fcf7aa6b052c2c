-- The services' own roles for docker compose (run once by the postgres image on an empty data
-- directory, before the migrations, which grant to them). DEVELOPMENT ONLY: the passwords are
-- public. In Kubernetes the CloudNativePG Cluster declares the same roles
-- (deploy/k8s/postgres/cluster.yaml, managed.roles); the embedded server of `socai up` makes
-- them itself (libs/socai/infra/db.py, ensure_roles).
--
-- The migrations run as the owner (here `socai`, POSTGRES_USER); each service connects as its
-- role, which owns nothing — it cannot ALTER a table or DISABLE a TRIGGER — and holds only
-- what its service's migrations grant: the ledger inserts and reads the journal and moves
-- balances only with journal entries (ledger_0003), the table service keeps its own rows
-- (table_0003), settlement appends settled hands and keeps its dead letters (settlement_0003).
DO $$
DECLARE
  role_and_password text[];
BEGIN
  FOREACH role_and_password SLICE 1 IN ARRAY ARRAY[
    ['socai_ledger_service', 'dev-ledger-db-password'],
    ['socai_table_service', 'dev-table-db-password'],
    ['socai_settlement_service', 'dev-settlement-db-password']
  ] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = role_and_password[1]) THEN
      EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', role_and_password[1], role_and_password[2]);
    END IF;
  END LOOP;
END
$$;

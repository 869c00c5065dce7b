-- Tenants: a run carries the tenant of the principal that started it
-- (NULL: no tenant). Its successors (retry, rerun, continue-as-new) inherit it. Reading a run by
-- id stays a primary-key read: the tenant is compared on the row read, never a second query.
ALTER TABLE executions ADD COLUMN tenant text CHECK (tenant IS NULL OR tenant <> '');

-- Listing within a tenant: newest first, overall and per workflow (the hot list paths).
CREATE INDEX executions_tenant_created ON executions (tenant, created_at DESC, id DESC);
CREATE INDEX executions_tenant_workflow ON executions (tenant, workflow, created_at DESC, id DESC);

-- An idempotency key is a tenant's own: the same key in another tenant starts another run
-- (otherwise a start would hand back another tenant's run, or betray that it exists).
-- coalesce: NULL (no tenant) is one namespace of its own; '' is refused above.
DROP INDEX executions_idempotency;
CREATE UNIQUE INDEX executions_idempotency
    ON executions (workflow, (coalesce(tenant, '')), idempotency_key)
    WHERE idempotency_key IS NOT NULL;

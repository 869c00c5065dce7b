-- Token store and audit trail.
--
-- api_tokens: API tokens kept as the SHA-256 of the secret (the secret is shown once, never
-- stored). A name is unique among live tokens; a revoked token keeps its row (and its name
-- may be reused). Every change notifies 'tether_tokens' so each server reloads its cache.
CREATE TABLE api_tokens (
    id           bigserial PRIMARY KEY,
    name         text        NOT NULL CHECK (name <> ''),
    role         text        NOT NULL CHECK (role IN ('reader', 'operator', 'admin')),
    tenant       text,
    hash         text        NOT NULL UNIQUE CHECK (hash ~ '^[0-9a-f]{64}$'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz,
    last_used_at timestamptz
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;

-- audit: append-only, one row per action (tool call, tasks/update, tasks/cancel, CLI mutation,
-- token change), refused ones included. Rows are only ever inserted, and deleted by retention.
CREATE TABLE audit (
    id           bigserial   PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT now(),
    principal    text        NOT NULL,
    tenant       text,
    surface      text        NOT NULL CHECK (surface IN ('mcp', 'cli', 'console')),
    method       text        NOT NULL,
    tool         text,
    execution_id text,
    outcome      text        NOT NULL CHECK (outcome IN ('ok', 'refused', 'error')),
    error_code   integer,
    remote       text
);
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_principal ON audit (principal, at);
CREATE INDEX audit_execution ON audit (execution_id, at) WHERE execution_id IS NOT NULL;

CREATE FUNCTION tether_audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit rows are append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit
    FOR EACH ROW EXECUTE FUNCTION tether_audit_append_only();

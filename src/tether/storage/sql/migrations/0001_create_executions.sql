-- Durable runtime schema. One hot row per execution; everything else hangs off it
-- by execution_id and goes with it (ON DELETE CASCADE) when retention deletes the row.

CREATE TABLE executions (
    id               text        PRIMARY KEY,
    workflow         text        NOT NULL,
    business_id      text        NOT NULL,
    status           text        NOT NULL CHECK (status IN (
                         'pending', 'running', 'waiting', 'completed', 'failed', 'timed_out',
                         'cancelled', 'terminated', 'continued_as_new')),
    version          bigint      NOT NULL DEFAULT 1,
    last_event_id    bigint      NOT NULL DEFAULT 0,
    input            jsonb,
    output           jsonb,
    error            jsonb,
    waits            jsonb       NOT NULL DEFAULT '[]'::jsonb,
    details          text,
    cancel_requested boolean     NOT NULL DEFAULT false,
    idempotency_key  text,
    predecessor_id   text,
    successor_id     text,
    root_id          text        NOT NULL,
    sealed_from      text,
    retention_s      bigint      CHECK (retention_s IS NULL OR retention_s >= 0),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz,
    expires_at       timestamptz,
    wake_at          timestamptz,
    deadline_at      timestamptz,
    lease_owner      text,
    lease_until      timestamptz,
    attempt          integer     NOT NULL DEFAULT 0,
    run_attempt      integer     NOT NULL DEFAULT 1
);

-- Crash-safe create: one run per (workflow, key) for as long as the row lives.
CREATE UNIQUE INDEX executions_idempotency ON executions (workflow, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Workers claim by wake_at: pending runs, due timers and backoffs, and expired leases (a running
-- row keeps wake_at = lease_until), so one partial index serves every claim.
CREATE INDEX executions_wake ON executions (wake_at) WHERE wake_at IS NOT NULL;
-- Retention janitor.
CREATE INDEX executions_expiry ON executions (expires_at) WHERE expires_at IS NOT NULL;
-- Listing: newest first, per workflow, per chain, per business id.
CREATE INDEX executions_created ON executions (created_at DESC, id DESC);
CREATE INDEX executions_workflow ON executions (workflow, created_at DESC, id DESC);
CREATE INDEX executions_business ON executions (workflow, business_id);
CREATE INDEX executions_root ON executions (root_id);

-- Append-only history: lifecycle and every input from outside (signals, answers, updates,
-- cancel requests). last_event_id on the row is the newest event_id here.
CREATE TABLE history (
    execution_id text        NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    event_id     bigint      NOT NULL,
    type         text        NOT NULL,
    data         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, event_id)
);

-- Recorded results of durable calls, keyed by the call's sequence number in the workflow body.
-- done = false marks an open record (a timer or wait's deadline, a step's failed attempts).
CREATE TABLE steps (
    execution_id text        NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    seq          integer     NOT NULL,
    kind         text        NOT NULL,
    name         text        NOT NULL,
    result       jsonb,
    done         boolean     NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, seq)
);

-- Inputs from outside, kept until a wait consumes them (an answer that arrives early is not
-- lost). key is the wait key an answer was given for; it makes answers idempotent.
CREATE TABLE signals (
    id           bigserial   PRIMARY KEY,
    execution_id text        NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    channel      text        NOT NULL,
    key          text,
    payload      jsonb,
    by_principal text,
    consumed_seq integer,
    at           timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX signals_key ON signals (execution_id, key) WHERE key IS NOT NULL;
CREATE INDEX signals_open ON signals (execution_id, channel, id) WHERE consumed_seq IS NULL;

-- Updates: validated before admission, run by the worker, answered to the caller.
CREATE TABLE updates (
    id           text        PRIMARY KEY,
    execution_id text        NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    name         text        NOT NULL,
    input        jsonb,
    status       text        NOT NULL DEFAULT 'admitted'
                     CHECK (status IN ('admitted', 'completed', 'failed')),
    output       jsonb,
    error        jsonb,
    by_principal text,
    admitted_at  timestamptz NOT NULL DEFAULT now(),
    ended_at     timestamptz
);
CREATE INDEX updates_open ON updates (execution_id, admitted_at) WHERE status = 'admitted';

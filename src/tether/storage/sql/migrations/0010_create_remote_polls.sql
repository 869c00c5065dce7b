-- Remote tasks that parked runs wait on (runtime/remote): one row per remote call in flight,
-- due when its task should be polled next. A worker's poller claims due rows, asks the remote
-- how the task stands, and wakes the run only when the task changed (tether_append_event); an
-- unchanged task is just due again later. The run's step record (same execution_id and seq)
-- holds the remote, the task and what the run last saw.
CREATE TABLE remote_polls (
    execution_id text        NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    seq          integer     NOT NULL,
    due_at       timestamptz NOT NULL,
    PRIMARY KEY (execution_id, seq)
);
CREATE INDEX remote_polls_due ON remote_polls (due_at);

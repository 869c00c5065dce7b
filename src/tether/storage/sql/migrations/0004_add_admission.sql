-- Admission: named queues and max_active_runs, labels, runtime profiles, cron schedules.
--
-- A run started on a queue is inserted with queue set, admitted_at NULL and wake_at NULL: it is
-- queued (Dagu's `queued`), invisible to the claim (which reads only the wake_at index). A worker
-- admits queued runs oldest first while the queue has room (admitted_at and wake_at set); from
-- then on the run is claimed like any other and holds its slot until it ends.
ALTER TABLE executions
    ADD COLUMN queue       text,
    ADD COLUMN admitted_at timestamptz,
    ADD COLUMN labels      jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN profile     text,
    ADD COLUMN profile_env jsonb;

-- FIFO backlog of each queue.
CREATE INDEX executions_queued ON executions (queue, created_at, id)
    WHERE queue IS NOT NULL AND admitted_at IS NULL AND ended_at IS NULL;
-- The runs holding a queue's slots (counted under the queue's lock).
CREATE INDEX executions_queue_active ON executions (queue)
    WHERE queue IS NOT NULL AND admitted_at IS NOT NULL AND ended_at IS NULL;
-- Singleton starts: the live runs of a workflow.
CREATE INDEX executions_live ON executions (workflow) WHERE ended_at IS NULL;
-- Label filters (`labels @> '{"k": "v"}'`, `labels ?& '{k}'`).
CREATE INDEX executions_labels ON executions USING gin (labels);

-- One row per (workflow, cron expression): the last tick a run was started for. A scheduler
-- locks the row (SKIP LOCKED), starts the due ticks' runs and moves last_tick in one
-- transaction, so any number of schedulers start exactly one run per tick.
CREATE TABLE schedules (
    workflow  text        NOT NULL,
    cron      text        NOT NULL,
    last_tick timestamptz NOT NULL,
    PRIMARY KEY (workflow, cron)
);

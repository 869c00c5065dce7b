-- Every query Tether sends, each a `-- name:` block with its description (storage/queries.py
-- loads them once, at import). A `-- part:` block is SQL that several queries share, written
-- once and included where they say `{{ part }}` (`{{ part from $N }}`: its parameters numbered
-- from $N). The part `ended_statuses` is not in this file: storage/queries.py gives it, the
-- SQL list of the statuses that end a run, from their one definition (storage/rows.py).

-- name: insert_execution
-- Create a pending run with its `created` event, unless (workflow, idempotency_key) is taken;
-- wakes the workers in the same transaction. No row back means the key was taken (keys are per
-- tenant: $15, NULL for none). A run on a queue ($11) is inserted queued: wake_at NULL, so no
-- claim sees it until a worker admits it. $16 false: no wake-up here (the caller sends `wake`
-- once this has committed). $17 (a worker of the starting process with a free slot, NULL for
-- none): a run due at once (no queue) is inserted already claimed by it for $18 seconds, as
-- `claim_executions` would leave it (status 'running', attempt 1, wake_at = lease_until), so its
-- lease expires, and any worker claims it again, if that worker never runs it.
WITH ins AS (
    INSERT INTO executions (id, workflow, business_id, status, input, idempotency_key,
                            predecessor_id, root_id, retention_s, deadline_at, wake_at,
                            last_event_id, queue, labels, profile, profile_env, tenant,
                            lease_owner, lease_until, attempt)
    SELECT $1, $2, $3, CASE WHEN h.owner IS NULL THEN 'pending' ELSE 'running' END, $4, $5, $6,
           $7, $8, $9,
           CASE WHEN h.owner IS NOT NULL THEN tether_now() + make_interval(secs => $18)
                WHEN $11::text IS NULL THEN tether_now() END,
           1, $11, $12, $13, $14, $15,
           h.owner, CASE WHEN h.owner IS NOT NULL THEN tether_now() + make_interval(secs => $18) END,
           CASE WHEN h.owner IS NULL THEN 0 ELSE 1 END
    FROM (SELECT CASE WHEN $11::text IS NULL THEN $17::text END AS owner) AS h
    ON CONFLICT (workflow, (coalesce(tenant, '')), idempotency_key)
        WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO history (execution_id, event_id, type, data)
    SELECT id, 1, 'created', $10 FROM ins
)
SELECT ins.*, (CASE WHEN $16::boolean THEN pg_notify('tether_ready', ins.id) END)::text AS notified
FROM ins;

-- name: wake
-- NOTIFY channel $1[i] with payload $2[i] for each i, in a transaction of its own that does not
-- wait for its commit to reach the disk (synchronous_commit off for this transaction only).
-- PostgreSQL serializes notifying transactions: each holds the notification lock from its NOTIFY
-- until its commit has ended, WAL flush included, so a write that notifies in its own transaction
-- cannot share a flush with any other such write. Sent after the write has committed, a listener
-- woken by it sees the write; a wake-up lost in a crash is covered by the listeners' polling.
SELECT set_config('synchronous_commit', 'off', true), pg_notify(w.channel, w.payload)
FROM unnest($1::text[], $2::text[]) AS w(channel, payload);

-- name: insert_executions
-- `insert_execution` for many runs in one statement (batched starts): one row per array element,
-- in order ($1..$15 are arrays of the same length, element i describing run i; jsonb values as
-- JSON text, so a JSON array is one element, not a dimension). A run whose
-- (workflow, tenant, idempotency_key) is taken, by an existing run or by an earlier element of
-- the same batch, is skipped and has no row back (the caller resolves its key). It wakes no
-- one: the caller sends one `wake` for the batch once this has committed.
WITH item AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]::jsonb[], $5::text[],
                         $6::text[], $7::text[], $8::int[], $9::timestamptz[],
                         $10::text[]::jsonb[], $11::text[], $12::text[]::jsonb[], $13::text[],
                         $14::text[]::jsonb[], $15::text[])
        WITH ORDINALITY AS i(id, workflow, business_id, input, idempotency_key, predecessor_id,
                             root_id, retention_s, deadline_at, created_data, queue, labels,
                             profile, profile_env, tenant, n)
), ins AS (
    INSERT INTO executions (id, workflow, business_id, status, input, idempotency_key,
                            predecessor_id, root_id, retention_s, deadline_at, wake_at,
                            last_event_id, queue, labels, profile, profile_env, tenant)
    SELECT id, workflow, business_id, 'pending', input, idempotency_key, predecessor_id,
           root_id, retention_s, deadline_at, CASE WHEN queue IS NULL THEN tether_now() END, 1,
           queue, labels, profile, profile_env, tenant
    FROM item ORDER BY n
    ON CONFLICT (workflow, (coalesce(tenant, '')), idempotency_key)
        WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO history (execution_id, event_id, type, data)
    SELECT ins.id, 1, 'created', item.created_data FROM ins JOIN item USING (id)
)
SELECT ins.* FROM ins;

-- name: get_execution
-- One run by primary key.
SELECT * FROM executions WHERE id = $1;

-- name: get_executions
-- Runs by primary key, several at once (coalesced reads: storage/coalesce.py).
SELECT * FROM executions WHERE id = ANY($1::text[]);

-- name: get_execution_for_update
-- One run by primary key, locked for the rest of the transaction.
SELECT * FROM executions WHERE id = $1 FOR UPDATE;

-- name: get_by_idempotency_key
-- The run that holds (workflow, idempotency_key) in tenant $3 (NULL: no tenant).
SELECT * FROM executions
WHERE workflow = $1 AND coalesce(tenant, '') = coalesce($3::text, '') AND idempotency_key = $2;

-- name: get_chain
-- A run and every successor after it (retry and continue-as-new links), oldest first.
WITH RECURSIVE chain AS (
    SELECT e.*, 0 AS depth FROM executions e WHERE e.id = $1
    UNION ALL
    SELECT e.*, c.depth + 1 FROM executions e JOIN chain c ON e.id = c.successor_id
    WHERE c.depth < 10000
)
SELECT * FROM chain ORDER BY depth;

-- name: list_executions
-- Newest first, with optional filters and a (created_at, id) cursor; labels: $8 the key=value
-- pairs a run must carry, $9 the keys it must have (any value). $10 false: every tenant; true:
-- only tenant $11 (NULL: the runs with no tenant). $12: only the runs principal $12 started
-- (their `created` event's `by`); $13: only the runs whose id starts with $13 or whose
-- business id holds it.
SELECT * FROM executions
WHERE (NOT $10::boolean OR tenant = $11::text OR ($11::text IS NULL AND tenant IS NULL))
  AND ($1::text IS NULL OR workflow = $1)
  AND ($2::text[] IS NULL OR status = ANY($2::text[]))
  AND ($3::text IS NULL OR business_id = $3)
  AND ($4::text IS NULL OR root_id = $4)
  AND ($5::timestamptz IS NULL OR (created_at, id) < ($5::timestamptz, $6::text))
  AND ($8::jsonb IS NULL OR labels @> $8::jsonb)
  AND ($9::text[] IS NULL OR labels ?& $9::text[])
  AND ($12::text IS NULL OR EXISTS (
      SELECT 1 FROM history h
      WHERE h.execution_id = executions.id AND h.event_id = 1 AND h.data->>'by' = $12))
  AND ($13::text IS NULL OR starts_with(id, $13) OR strpos(business_id, $13) > 0)
ORDER BY created_at DESC, id DESC
LIMIT $7;

-- name: get_history
-- A run's events in order.
SELECT event_id, type, data, at FROM history WHERE execution_id = $1 ORDER BY event_id;

-- name: get_steps
-- A run's recorded durable calls in order.
SELECT seq, kind, name, result, done, at FROM steps WHERE execution_id = $1 ORDER BY seq;

-- name: get_history_page
-- A run's events before event $2 (NULL: from its newest), newest first, at most $3: one
-- bounded page of a long history (the primary key read backwards).
SELECT event_id, type, data, at FROM history
WHERE execution_id = $1 AND event_id < coalesce($2::bigint, 9223372036854775807)
ORDER BY event_id DESC
LIMIT $3;

-- name: get_steps_page
-- A run's recorded calls before seq $2 (NULL: from its newest), newest first, at most $3.
SELECT seq, kind, name, result, done, at FROM steps
WHERE execution_id = $1 AND seq < coalesce($2::integer, 2147483647)
ORDER BY seq DESC
LIMIT $3;

-- name: get_starters
-- Who started each of the runs $1: their `created` event's `by` (NULL where none was recorded).
SELECT execution_id, data->>'by' AS by FROM history
WHERE execution_id = ANY($1::text[]) AND event_id = 1;

-- name: insert_token
-- A new API token (its secret's SHA-256 only); tells every server to reload its token cache.
WITH ins AS (
    INSERT INTO api_tokens (name, role, tenant, hash, expires_at)
    VALUES ($1, $2, $3, $4, $5)
    RETURNING *
)
SELECT ins.*, pg_notify('tether_tokens', ins.id::text)::text AS notified FROM ins;

-- name: list_tokens
-- Tokens oldest first, revoked ones only when $1; never a hash.
SELECT id, name, role, tenant, created_at, expires_at, revoked_at, last_used_at
FROM api_tokens
WHERE $1::boolean OR revoked_at IS NULL
ORDER BY created_at, id;

-- name: load_tokens
-- Every token's hash and principal for a server's cache (revoked rows count as "tokens exist").
SELECT hash, name, role, tenant, expires_at, revoked_at IS NOT NULL AS revoked FROM api_tokens;

-- name: revoke_token
-- Revoke the live token named $1; tells every server to reload. No row: no such live token.
WITH rev AS (
    UPDATE api_tokens SET revoked_at = tether_now()
    WHERE name = $1 AND revoked_at IS NULL
    RETURNING id
)
SELECT rev.id, pg_notify('tether_tokens', rev.id::text)::text AS notified FROM rev;

-- name: touch_tokens
-- Record the last use of the tokens with these hashes (written at most once a minute each).
UPDATE api_tokens SET last_used_at = tether_now() WHERE hash = ANY($1::text[]);

-- name: insert_audit
-- Append audit rows, one per element of the parallel arrays.
INSERT INTO audit (at, principal, tenant, surface, method, tool, execution_id, outcome,
                   error_code, remote)
SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[],
                     $6::text[], $7::text[], $8::text[], $9::integer[], $10::text[]);

-- name: list_audit
-- Audit rows newest first, with optional filters: since, principal, execution id.
SELECT * FROM audit
WHERE ($1::timestamptz IS NULL OR at >= $1)
  AND ($2::text IS NULL OR principal = $2)
  AND ($3::text IS NULL OR execution_id = $3)
ORDER BY at DESC, id DESC
LIMIT $4;

-- name: delete_old_audit
-- Audit retention: delete up to $2 rows older than $1 days, oldest first.
WITH doomed AS (
    SELECT id FROM audit WHERE at < tether_now() - make_interval(secs => $1::float8 * 86400)
    ORDER BY at LIMIT $2
)
DELETE FROM audit WHERE id IN (SELECT id FROM doomed) RETURNING id;

-- name: set_notify_routes
-- Make the notification routes exactly $1 ([{workflow, channel, recipient, events, kinds}]):
-- routes not in it are deleted, the others written (one statement, so processes that start
-- together with the same configuration leave the same routes).
WITH wanted AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb)
        AS r(workflow text, channel text, recipient text, events text[], kinds text[])
), gone AS (
    DELETE FROM notify_routes n
    WHERE NOT EXISTS (SELECT 1 FROM wanted w WHERE w.workflow = n.workflow
                      AND w.channel = n.channel AND w.recipient = n.recipient)
)
INSERT INTO notify_routes (workflow, channel, recipient, events, kinds)
SELECT workflow, channel, recipient, events, kinds FROM wanted
ON CONFLICT (workflow, channel, recipient)
    DO UPDATE SET events = EXCLUDED.events, kinds = EXCLUDED.kinds;

-- name: claim_notifications
-- Claim up to $3 due notifications of the channels $2 for sender $1, for $4 seconds: the claim
-- counts an attempt, and its end is when the row is due again should the sender die holding it.
WITH due AS (
    SELECT id FROM outbox
    WHERE next_at <= tether_now() AND channel = ANY ($2::text[])
    ORDER BY next_at, id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox o SET
    attempts   = o.attempts + 1,
    claimed_by = $1,
    next_at    = tether_now() + make_interval(secs => $4)
FROM due
WHERE o.id = due.id
RETURNING o.id, o.delivery_id, o.channel, o.recipient, o.event, o.execution_id, o.data,
          o.created_at, o.attempts;

-- name: mark_notification_sent
-- Sender $2's claim $3 (its attempt) of notification $1 was delivered: done. No row back: the
-- claim ran out and another sender holds it now.
UPDATE outbox SET sent_at = tether_now(), next_at = NULL, claimed_by = NULL, last_error = NULL
WHERE id = $1 AND claimed_by = $2 AND attempts = $3
RETURNING id;

-- name: retry_notification
-- Sender $2's claim $3 of notification $1 failed with $5: due again in $4 seconds, or given up
-- ($4 NULL). No row back: the claim ran out and another sender holds it now.
UPDATE outbox SET
    next_at    = CASE WHEN $4::float8 IS NULL THEN NULL
                      ELSE tether_now() + make_interval(secs => $4::float8) END,
    failed_at  = CASE WHEN $4::float8 IS NULL THEN tether_now() END,
    claimed_by = NULL,
    last_error = $5
WHERE id = $1 AND claimed_by = $2 AND attempts = $3
RETURNING id;

-- name: delete_old_notifications
-- Outbox retention: delete up to $2 rows created more than $1 seconds ago, oldest first, but
-- for the announcement of a wait of a live run (it routes the wait's answer and keeps the run
-- from announcing the wait twice).
WITH doomed AS (
    SELECT o.id FROM outbox o
    WHERE o.created_at < tether_now() - make_interval(secs => $1::float8)
      AND NOT (o.event = 'wait.opened' AND EXISTS (
          SELECT 1 FROM executions e WHERE e.id = o.execution_id AND e.ended_at IS NULL))
    ORDER BY o.created_at
    LIMIT $2
)
DELETE FROM outbox WHERE id IN (SELECT id FROM doomed) RETURNING id;

-- part: claim_lease
-- The claim's rules, for the runs in `due` (id; lost: its lease expired): each is leased to
-- worker $1 for $2 seconds; a lost lease counts one more in a row (lost_leases), and the claim
-- that brings the count to $4 (TETHER_MAX_RECOVERY_ATTEMPTS) ends the run failed instead (error
-- $5 with message $6, `%s` the count) with its `ended` event. `claimed`: the rows as left;
-- `ended`: the runs ended. `claim_executions` and the refill of the checkpoint statements
-- (`checkpoint_refill`, its parameters from $18) are this one text.
claimed AS (
    UPDATE executions e SET
        lost_leases = e.lost_leases + due.lost::integer,
        status      = CASE WHEN due.lost AND e.lost_leases + 1 >= $4 THEN 'failed'
                           ELSE 'running' END,
        error       = CASE WHEN due.lost AND e.lost_leases + 1 >= $4
                           THEN $5::jsonb || jsonb_build_object(
                                'message', format($6::text, e.lost_leases + 1),
                                'lost_leases', e.lost_leases + 1)
                           ELSE e.error END,
        ended_at    = CASE WHEN due.lost AND e.lost_leases + 1 >= $4 THEN tether_now()
                           ELSE e.ended_at END,
        expires_at  = CASE WHEN due.lost AND e.lost_leases + 1 >= $4
                           THEN tether_now() + make_interval(secs => e.retention_s)
                           ELSE e.expires_at END,
        last_event_id = e.last_event_id + (due.lost AND e.lost_leases + 1 >= $4)::integer,
        lease_owner = CASE WHEN due.lost AND e.lost_leases + 1 >= $4 THEN NULL ELSE $1 END,
        lease_until = CASE WHEN due.lost AND e.lost_leases + 1 >= $4 THEN NULL
                           ELSE tether_now() + make_interval(secs => $2) END,
        wake_at     = CASE WHEN due.lost AND e.lost_leases + 1 >= $4 THEN NULL
                           ELSE tether_now() + make_interval(secs => $2) END,
        attempt     = e.attempt + 1,
        waits       = '[]'::jsonb,
        version     = e.version + 1,
        updated_at  = tether_now()
    FROM due
    WHERE e.id = due.id
    RETURNING e.*
), ended AS (
    INSERT INTO history (execution_id, event_id, type, data)
    SELECT id, last_event_id, 'ended', jsonb_build_object('status', status, 'error', error)
    FROM claimed WHERE status = 'failed'
    RETURNING execution_id
)

-- name: claim_executions
-- Lease up to $3 due runs (pending, woken timers, expired leases) to worker $1 for $2 seconds,
-- by the claim's rules (`claim_lease`: $4..$6 abandon a run whose leases keep being lost). A
-- running row keeps wake_at = lease_until, so an expired lease is simply due again. Rows come
-- back with status 'running' (run them) or 'failed' (abandoned: watchers woken). With $7
-- (tracing on), each row also brings the `traceparent` stored in its `created` event.
WITH due AS (
    SELECT id, status = 'running' AS lost FROM executions
    WHERE wake_at <= tether_now()
    ORDER BY wake_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), {{ claim_lease }}, notes AS (
    SELECT pg_notify('tether_change', execution_id) FROM ended
)
SELECT claimed.*, (SELECT count(*) FROM notes) AS notified,
       CASE WHEN $7::boolean THEN (SELECT h.data->>'traceparent' FROM history h
                                   WHERE h.execution_id = claimed.id AND h.event_id = 1)
       END AS traceparent
FROM claimed;

-- name: load_run_state
-- What replay needs besides the row: recorded calls, unconsumed signals, admitted updates.
SELECT
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'seq', seq, 'kind', kind, 'name', name, 'result', result, 'done', done)
            ORDER BY seq), '[]'::jsonb)
       FROM steps WHERE execution_id = $1) AS steps,
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'id', id, 'channel', channel, 'key', key, 'payload', payload, 'by', by_principal)
            ORDER BY id), '[]'::jsonb)
       FROM signals WHERE execution_id = $1 AND consumed_seq IS NULL) AS signals,
    (SELECT coalesce(jsonb_agg(jsonb_build_object('id', id, 'name', name, 'input', input)
            ORDER BY admitted_at, id), '[]'::jsonb)
       FROM updates WHERE execution_id = $1 AND status = 'admitted') AS updates;

-- part: checkpoint_params
-- One write as the relation `checkpoint_write` reads (`c`): `checkpoint`'s $1..$17, in order.
SELECT $1::text AS id, $2::text AS owner, $3::integer AS attempt, $4::jsonb AS records,
       $5::jsonb AS consumed, $6::jsonb AS events, $7::boolean AS set_details,
       $8::text AS details, $9::text AS status, $10::jsonb AS output, $11::jsonb AS error,
       $12::jsonb AS waits, $13::timestamptz AS wake_at, $14::bigint AS seen,
       $15::text AS successor_id, $16::integer AS run_attempt, $17::integer AS truncate_from

-- part: checkpoint_fence
-- A worker's write applies only while it holds the run's lease: the run `e`, written by `c`,
-- still has the lease owner and attempt the write names.
e.id = c.id AND e.lease_owner = c.owner AND e.attempt = c.attempt

-- part: checkpoint_progress
-- What every write does to the run `e`: a new version; recording a call (`c.records` not
-- empty) or settling (`c.status`) is progress, which resets the lost-lease count.
version        = e.version + 1,
updated_at     = tether_now(),
lost_leases    = CASE WHEN c.status IS NOT NULL OR jsonb_array_length(c.records) > 0
                      THEN 0 ELSE e.lost_leases END

-- part: record_calls
-- `rec`: record the durable calls of each write whose fence held (`lease`: id, records); a
-- call already recorded as done keeps its result.
rec AS (
    INSERT INTO steps (execution_id, seq, kind, name, result, done)
    SELECT lease.id, r.seq, r.kind, r.name, r.result, r.done
    FROM lease, jsonb_to_recordset(lease.records) AS r(seq integer, kind text, name text,
                                                       result jsonb, done boolean)
    ON CONFLICT (execution_id, seq) DO UPDATE
        SET result = EXCLUDED.result, done = EXCLUDED.done, at = tether_now()
        WHERE NOT steps.done
)

-- part: checkpoint_write
-- The state transition of a worker's write, for every write in the relation `c` (one row per
-- run, its columns those of `checkpoint_params`), each fenced (`checkpoint_fence`): `lease`
-- updates the run's row and returns it with what the rest needs; `trunc` drops the records
-- from the first failed call on (a run-level retry), `rec` records calls, `con` marks signals
-- consumed and `ev` appends the worker's events. A park ('waiting') becomes 'pending' when an
-- event arrived since the worker last looked (`c.seen`), so nothing is missed; a status in
-- `ended_statuses` ends the run.
lease AS (
    UPDATE executions e SET
        {{ checkpoint_progress }},
        last_event_id  = e.last_event_id + jsonb_array_length(c.events),
        details        = CASE WHEN c.set_details THEN c.details ELSE e.details END,
        status         = CASE
                            WHEN c.status IS NULL THEN e.status
                            WHEN c.status = 'waiting' AND e.last_event_id <> c.seen
                                THEN 'pending'
                            ELSE c.status END,
        output         = CASE WHEN c.status IS NULL THEN e.output ELSE c.output END,
        error          = CASE WHEN c.status IS NULL THEN e.error ELSE c.error END,
        waits          = CASE
                            WHEN c.status = 'waiting' AND e.last_event_id = c.seen
                                THEN c.waits
                            WHEN c.status IS NULL THEN e.waits
                            ELSE '[]'::jsonb END,
        wake_at        = CASE
                            WHEN c.status IS NULL THEN e.wake_at
                            WHEN c.status = 'waiting' AND e.last_event_id <> c.seen
                                THEN tether_now()
                            WHEN c.status IN ('waiting', 'pending') THEN c.wake_at
                            ELSE NULL END,
        lease_owner    = CASE WHEN c.status IS NULL THEN e.lease_owner ELSE NULL END,
        lease_until    = CASE WHEN c.status IS NULL THEN e.lease_until ELSE NULL END,
        ended_at       = CASE WHEN c.status IN ({{ ended_statuses }})
                              THEN tether_now() ELSE e.ended_at END,
        expires_at     = CASE WHEN c.status IN ({{ ended_statuses }})
                              THEN tether_now() + make_interval(secs => e.retention_s)
                              ELSE e.expires_at END,
        successor_id   = coalesce(c.successor_id, e.successor_id),
        run_attempt    = e.run_attempt + c.run_attempt
    FROM c
    WHERE {{ checkpoint_fence }}
    RETURNING e.id, e.status, e.cancel_requested, e.last_event_id, e.wake_at, e.queue,
              c.records, c.consumed, c.events, c.set_details, c.status AS set_status,
              c.truncate_from
), trunc AS (
    DELETE FROM steps s USING lease
    WHERE lease.truncate_from IS NOT NULL AND s.execution_id = lease.id
      AND s.seq >= lease.truncate_from
), {{ record_calls }}, con AS (
    UPDATE signals s SET consumed_seq = x.seq
    FROM lease, jsonb_to_recordset(lease.consumed) AS x(id bigint, seq integer)
    WHERE s.id = x.id AND s.execution_id = lease.id AND s.consumed_seq IS NULL
), ev AS (
    INSERT INTO history (execution_id, event_id, type, data)
    SELECT lease.id, lease.last_event_id - jsonb_array_length(lease.events) + x.n, x.type, x.data
    FROM lease, ROWS FROM (jsonb_to_recordset(lease.events) AS (type text, data jsonb))
         WITH ORDINALITY AS x(type, data, n)
)

-- part: checkpoint_changed
-- Whether a written run's watchers are to be woken (`tether_change`): the write set its status
-- or its details.
(lease.set_status IS NOT NULL OR lease.set_details)

-- part: checkpoint_ready
-- Whether the workers are to be woken (`tether_ready`) for a written run: it is due now, or it
-- ended on a queue, whose slot is then free for the next run.
((lease.status = 'pending' AND lease.wake_at <= tether_now())
 OR (lease.queue IS NOT NULL AND lease.status IN ({{ ended_statuses }})))

-- part: checkpoint_refill
-- The refill of a statement that writes the runs named in `written` (ids): up to $3 due runs
-- claimed for worker $1 by the claim's rules (`claim_lease`; $1..$6 as `claim_executions` takes
-- them), never a run the statement writes. The candidates are the first 64 due, locked as
-- they are found.
due AS (
    SELECT d.id, d.lost FROM (
        SELECT x.id, x.status = 'running' AS lost FROM executions x
        WHERE x.wake_at <= tether_now() AND x.id <> ALL((SELECT ids FROM written)::text[])
        ORDER BY x.wake_at
        LIMIT 64
        FOR UPDATE SKIP LOCKED
    ) AS d
    LIMIT $3
), {{ claim_lease }}

-- part: checkpoint_reply
-- The rows back of a statement that writes and refills, paired by position: w_* columns for
-- the writes whose fence held (`w_changed`, `w_ready`: the wake-ups due for it), the claimed
-- rows' columns beside them.
w AS (
    SELECT row_number() OVER () AS w_n, lease.id AS w_id, lease.status AS w_status,
           lease.cancel_requested AS w_cancel_requested, lease.last_event_id AS w_last_event_id,
           {{ checkpoint_changed }} AS w_changed,
           {{ checkpoint_ready }} AS w_ready
    FROM lease
), k AS (
    SELECT row_number() OVER () AS k_n, claimed.* FROM claimed
)
SELECT w.*, k.* FROM w FULL JOIN k ON k.k_n = w.w_n

-- name: checkpoint
-- Every write a worker makes for a run, fenced by (lease_owner, attempt): record durable calls
-- ($4), mark consumed signals ($5), append the worker's own events ($6), set details ($7, $8),
-- and optionally settle the run ($9 status; NULL keeps it running); recording a call or
-- settling is progress, which resets the lost-lease count; a run-level retry drops
-- the records from the first failed call on ($17) so they run again. A park ('waiting') becomes
-- 'pending' when an event arrived since the worker last looked ($14), so nothing is missed.
-- The transition is `checkpoint_write`'s, which every checkpoint statement shares. Its
-- wake-ups are sent in the statement: a queued run's end wakes the workers, which admit the
-- next run of its queue. No row back means the lease was lost and nothing was written.
WITH c AS (
    {{ checkpoint_params }}
), {{ checkpoint_write }}, notes AS (
    SELECT pg_notify('tether_change', lease.id) FROM lease WHERE {{ checkpoint_changed }}
    UNION ALL
    SELECT pg_notify('tether_ready', lease.id) FROM lease WHERE {{ checkpoint_ready }}
)
SELECT lease.id, lease.status, lease.cancel_requested, lease.last_event_id,
       (SELECT count(*) FROM notes) AS notified
FROM lease;

-- name: checkpoint_step
-- `checkpoint` for a run's commonest write: records of durable calls ($4, not empty) and
-- nothing else (no signal consumed, event, details, settle, truncation). Its effect is that of
-- `checkpoint` with those parameters empty, in a lighter statement (storage/checkpoints.py sends
-- it when a statement carries one such write): the fence, the row's progress and the records,
-- the same parts as `checkpoint_write`'s, without the assignments and CTEs that such a write
-- leaves as they were. It notifies no one; `changed` and `ready` are those `checkpoint_many`
-- returns. No row back means the lease was lost and nothing was written. $5 false: the commit
-- does not wait for the WAL flush (synchronous_commit off for this transaction only; true keeps
-- the server's setting): the records survive the worker's crash, and are lost to a crash of
-- PostgreSQL itself within about three `wal_writer_delay`s of the commit.
WITH relax AS (
    SELECT set_config('synchronous_commit',
                      CASE WHEN $5 THEN current_setting('synchronous_commit') ELSE 'off' END,
                      true)
), c AS (
    SELECT $1::text AS id, $2::text AS owner, $3::integer AS attempt, $4::jsonb AS records,
           NULL::text AS status, false AS set_details
    FROM relax
), lease AS (
    UPDATE executions e SET
        {{ checkpoint_progress }}
    FROM c
    WHERE {{ checkpoint_fence }}
    RETURNING e.id, e.status, e.cancel_requested, e.last_event_id, e.wake_at, e.queue,
              c.records, c.set_details, c.status AS set_status
), {{ record_calls }}
SELECT lease.id, lease.status, lease.cancel_requested, lease.last_event_id,
       {{ checkpoint_changed }} AS changed,
       {{ checkpoint_ready }} AS ready
FROM lease;

-- name: checkpoint_many
-- `checkpoint` for several runs in one statement and one commit (group commit of a worker's
-- concurrent writes: storage/checkpoints.py). Element i of the arrays $1..$17 is run i's write,
-- its parameters those of `checkpoint` in the same order (jsonb ones as JSON text, so a JSON
-- array is one element, not a dimension); each is fenced by its own
-- (lease_owner, attempt), so a run whose lease is lost has no row back and nothing of its write
-- applied, while the others apply. The caller never puts two writes of one run in a statement.
-- It wakes no one: `changed` and `ready` say which runs' watchers and workers `checkpoint` would
-- have notified, and the caller sends those as `wake` once this has committed.
-- The same statement also claims up to $20 due runs for worker $18, exactly as
-- `claim_executions` with its $1..$6 as $18..$23 (0: none), never one of the runs it writes: a
-- worker refills the slots its settling runs free in the commit that frees them. Rows come back
-- paired by position: w_* columns for the writes, the claimed rows' columns beside them.
WITH c AS (
    SELECT * FROM unnest(
            (SELECT $1::text[]), (SELECT $2::text[]), (SELECT $3::integer[]),
            (SELECT $4::text[]::jsonb[]), (SELECT $5::text[]::jsonb[]),
            (SELECT $6::text[]::jsonb[]), (SELECT $7::boolean[]), (SELECT $8::text[]),
            (SELECT $9::text[]), (SELECT $10::text[]::jsonb[]), (SELECT $11::text[]::jsonb[]),
            (SELECT $12::text[]::jsonb[]), (SELECT $13::timestamptz[]), (SELECT $14::bigint[]),
            (SELECT $15::text[]), (SELECT $16::integer[]), (SELECT $17::integer[]))
        AS c(id, owner, attempt, records, consumed, events, set_details, details, status,
             output, error, waits, wake_at, seen, successor_id, run_attempt, truncate_from)
), written AS (
    SELECT $1::text[] AS ids
), {{ checkpoint_write }}, {{ checkpoint_refill from $18 }}, {{ checkpoint_reply }};

-- name: checkpoint_one
-- `checkpoint_many` for one write, its parameters scalars instead of arrays (jsonb ones as
-- jsonb): the same statement but for the CTEs that read the parameters (`c`, `written`), which
-- PostgreSQL runs in about two thirds of the time (no arrays to unnest and join).
WITH c AS (
    {{ checkpoint_params }}
), written AS (
    SELECT ARRAY[$1::text] AS ids
), {{ checkpoint_write }}, {{ checkpoint_refill from $18 }}, {{ checkpoint_reply }};

-- name: finish_update
-- Record an update handler's outcome (fenced like checkpoint), hand it to the workflow as a
-- signal on channel 'update:<name>' (payload $8: {id, input, output, error}, sealed like any
-- signal payload when encryption is on), and wake whoever waits for the update.
WITH lease AS (
    UPDATE executions e SET
        version       = e.version + 1,
        updated_at    = tether_now(),
        last_event_id = e.last_event_id + 1
    WHERE e.id = $1 AND e.lease_owner = $2 AND e.attempt = $3
    RETURNING e.id, e.last_event_id
), upd AS (
    UPDATE updates u SET status = $5, output = $6, error = $7, ended_at = tether_now()
    FROM lease WHERE u.id = $4 AND u.execution_id = lease.id AND u.status = 'admitted'
    RETURNING u.id, u.name, u.input, u.by_principal
), sig AS (
    INSERT INTO signals (execution_id, channel, payload, by_principal)
    SELECT lease.id, 'update:' || upd.name, $8::jsonb, upd.by_principal
    FROM lease, upd
), ev AS (
    INSERT INTO history (execution_id, event_id, type, data)
    SELECT lease.id, lease.last_event_id, 'update_' || $5,
           jsonb_build_object('update_id', $4::text, 'error', $7::jsonb)
    FROM lease
)
SELECT lease.last_event_id, pg_notify('tether_update', $4::text)::text AS notified FROM lease;

-- name: heartbeat
-- Extend the leases worker $1 still holds; the rows back are the runs it may keep writing.
UPDATE executions e SET
    lease_until = tether_now() + make_interval(secs => $4),
    wake_at     = tether_now() + make_interval(secs => $4)
FROM unnest($2::text[], $3::integer[]) AS l(id, attempt)
WHERE e.id = l.id AND e.attempt = l.attempt AND e.lease_owner = $1 AND e.status = 'running'
RETURNING e.id, e.cancel_requested;

-- name: append_event
-- An event from outside the run (see tether_append_event): NULL when the run has ended.
SELECT tether_append_event($1, $2, $3) AS event_id;

-- name: answer_keep_parked
-- An answer to one of several open waits of a park: drop that wait and record the event, but
-- leave the run parked — the other waits keep their keys until the last one is answered.
WITH ex AS (
    UPDATE executions SET
        waits = $2, last_event_id = last_event_id + 1, version = version + 1, updated_at = tether_now()
    WHERE id = $1 AND status = 'waiting'
    RETURNING id, last_event_id
), ev AS (
    INSERT INTO history (execution_id, event_id, type, data)
    SELECT id, last_event_id, $3, $4 FROM ex
)
SELECT ex.last_event_id, pg_notify('tether_change', ex.id)::text AS notified FROM ex;

-- name: insert_signal
-- Buffer an input for the run; a key makes it idempotent (no row back: the key was answered).
INSERT INTO signals (execution_id, channel, key, payload, by_principal)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (execution_id, key) WHERE key IS NOT NULL DO NOTHING
RETURNING id;

-- name: insert_steps
-- Seed a new run with recorded calls ($2: [{seq, kind, name, result, done}]): a resume keeps
-- the calls before the step it resumes from.
INSERT INTO steps (execution_id, seq, kind, name, result, done)
SELECT $1, r.seq, r.kind, r.name, r.result, r.done
FROM jsonb_to_recordset($2::jsonb) AS r(seq integer, kind text, name text, result jsonb,
                                        done boolean);

-- name: get_buffered_signals
-- The signals on one channel a run holds and has not consumed, oldest first.
SELECT id, channel, key, payload, by_principal AS by FROM signals
WHERE execution_id = $1 AND channel = $2 AND consumed_seq IS NULL ORDER BY id;

-- name: get_signal_by_key
-- The answer already given for a wait key, if any.
SELECT channel, payload, by_principal, at FROM signals WHERE execution_id = $1 AND key = $2;

-- name: insert_update
-- Admit a validated update.
INSERT INTO updates (id, execution_id, name, input, by_principal) VALUES ($1, $2, $3, $4, $5);

-- name: get_update
-- One update by id.
SELECT * FROM updates WHERE id = $1;

-- name: request_cancel
-- Set the cooperative cancel flag on a live run (the event is appended separately); a run
-- waiting out a retry backoff is woken at once, so the cancel does not wait for the backoff
-- (a queued run is not: cancel_queued ends it without running it).
UPDATE executions SET
    cancel_requested = true,
    wake_at = CASE WHEN status = 'pending' AND (queue IS NULL OR admitted_at IS NOT NULL)
                   THEN tether_now() ELSE wake_at END
WHERE id = $1 AND ended_at IS NULL
RETURNING id;

-- name: terminate_execution
-- End a live run at once; the lease is cleared, so its worker's next fenced write is refused.
WITH t AS (
    UPDATE executions SET
        status = 'terminated', ended_at = tether_now(), updated_at = tether_now(), version = version + 1,
        expires_at = tether_now() + make_interval(secs => retention_s),
        last_event_id = last_event_id + 1, lease_owner = NULL, lease_until = NULL,
        wake_at = NULL, waits = '[]'::jsonb, error = $2
    WHERE id = $1 AND ended_at IS NULL
    RETURNING id, last_event_id
), ev AS (
    INSERT INTO history (execution_id, event_id, type, data)
    SELECT id, last_event_id, 'terminated', $2 FROM t
)
SELECT t.id, pg_notify('tether_change', t.id)::text AS notified FROM t;

-- name: end_parked
-- End a parked run at once, $2 being its ending status and $3 its error, in the transaction
-- that answers it (a DAG gate's rejection: the run would do nothing more). NULL when the run
-- is not parked. Leaves the `ended` event a worker's settle does; a queued run's end wakes
-- the workers, which admit the next run of its queue.
WITH t AS (
    UPDATE executions SET
        status = $2, error = $3, ended_at = tether_now(), updated_at = tether_now(),
        version = version + 1, expires_at = tether_now() + make_interval(secs => retention_s),
        last_event_id = last_event_id + 1, lease_owner = NULL, lease_until = NULL,
        wake_at = NULL, waits = '[]'::jsonb
    WHERE id = $1 AND status = 'waiting'
    RETURNING id, last_event_id, queue
), ev AS (
    INSERT INTO history (execution_id, event_id, type, data)
    SELECT id, last_event_id, 'ended', jsonb_build_object('status', $2::text, 'error', $3::jsonb)
    FROM t
), notes AS (
    SELECT pg_notify('tether_change', t.id) FROM t
    UNION ALL
    SELECT pg_notify('tether_ready', t.id) FROM t WHERE t.queue IS NOT NULL
)
SELECT t.id, (SELECT count(*) FROM notes) AS notified FROM t;

-- name: seal_execution
-- Seal an ended run for an operator rerun: it keeps what it ended with in sealed_from.
UPDATE executions SET
    sealed_from = status, status = 'continued_as_new', version = version + 1,
    updated_at = tether_now()
WHERE id = $1 AND ended_at IS NOT NULL AND sealed_from IS NULL
RETURNING id;

-- name: link_successor
-- Point an ended run at the run that retries it.
UPDATE executions SET successor_id = $2, version = version + 1, updated_at = tether_now()
WHERE id = $1 AND successor_id IS NULL
RETURNING id;

-- name: delete_expired
-- Retention: delete up to $1 ended runs past their expiry, oldest first. A run's retention
-- guards it while any run with its (workflow, business_id) lives or ended less than that
-- retention ago (a continue-as-new chain keeps its first run). Dependents go by CASCADE.
WITH doomed AS (
    SELECT e.id FROM executions e
    WHERE e.expires_at <= tether_now()
      AND NOT EXISTS (
          SELECT 1 FROM executions l
          WHERE l.workflow = e.workflow AND l.business_id = e.business_id AND l.id <> e.id
            AND (l.ended_at IS NULL
                 OR l.ended_at + make_interval(secs => e.retention_s) > tether_now()))
    ORDER BY e.expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
DELETE FROM executions WHERE id IN (SELECT id FROM doomed) RETURNING id;

-- name: cancel_queued
-- Cancel a run still waiting in its queue: it ends `cancelled` at once (it never ran), with its
-- `ended` event; watchers are woken. No row back: the run is not queued (or already ended).
WITH c AS (
    UPDATE executions SET
        status = 'cancelled', cancel_requested = true, ended_at = tether_now(), updated_at = tether_now(),
        version = version + 1, expires_at = tether_now() + make_interval(secs => retention_s),
        last_event_id = last_event_id + 1, wake_at = NULL, error = $2
    WHERE id = $1 AND queue IS NOT NULL AND admitted_at IS NULL AND ended_at IS NULL
    RETURNING id, last_event_id, status, error
), ev AS (
    INSERT INTO history (execution_id, event_id, type, data)
    SELECT id, last_event_id, 'ended', jsonb_build_object('status', status, 'error', error)
    FROM c
)
SELECT c.id, pg_notify('tether_change', c.id)::text AS notified FROM c;

-- name: queues_with_backlog
-- Which of the queues $1 have queued runs (one index probe each).
SELECT q AS queue FROM unnest($1::text[]) AS q
WHERE EXISTS (SELECT 1 FROM executions e
              WHERE e.queue = q AND e.admitted_at IS NULL AND e.ended_at IS NULL);

-- name: lock_queue
-- Serialize admissions to queue $1 until the transaction ends (admit_queued must run in a
-- later statement, so its snapshot sees every admission committed before the lock was granted).
SELECT pg_advisory_xact_lock(hashtextextended('tether.queue:' || $1, 0));

-- name: admit_queued
-- Admit the oldest queued runs of queue $1 while fewer than $2 of its runs hold a slot
-- (admitted and not ended); each becomes due now and its workers are woken. Run it only under
-- lock_queue, in the same transaction. admitted_at is the clock after this statement's snapshot,
-- not tether_now() (the transaction's start, which may precede the lock wait): a slot freed by a
-- run whose end committed while we waited then never appears to overlap the run admitted into it.
-- It is read on tether_now()'s time (shifted by what that clock runs ahead of now(): nothing, but
-- in a test database whose clock skips).
WITH active AS (
    SELECT count(*) AS n FROM executions
    WHERE queue = $1 AND admitted_at IS NOT NULL AND ended_at IS NULL
), nxt AS (
    SELECT id FROM executions
    WHERE queue = $1 AND admitted_at IS NULL AND ended_at IS NULL
    ORDER BY created_at, id
    LIMIT greatest($2::bigint - (SELECT n FROM active), 0)
    FOR UPDATE
), stamp AS (  -- once: the runs admitted together share it
    SELECT clock_timestamp() + (tether_now() - now()) AS t
), adm AS (
    UPDATE executions e SET admitted_at = (SELECT t FROM stamp), wake_at = tether_now(), updated_at = tether_now(),
                            version = e.version + 1
    WHERE e.id = ANY(ARRAY(SELECT id FROM nxt))  -- primary-key probes, whatever the limit
    RETURNING e.id
)
SELECT adm.id, pg_notify('tether_ready', adm.id)::text AS notified FROM adm;

-- name: lock_workflow_starts
-- Serialize singleton starts of workflow $1 until the transaction ends.
SELECT pg_advisory_xact_lock(hashtextextended('tether.singleton:' || $1, 0));

-- name: live_run_of_workflow
-- One live run of workflow $1 in tenant $3 (NULL: no tenant), if any; with $2 false a queued
-- run does not count. A singleton is a tenant's own: another tenant's run neither blocks a
-- start nor is named in the refusal.
SELECT id FROM executions
WHERE workflow = $1 AND ended_at IS NULL
  AND ($2::boolean OR queue IS NULL OR admitted_at IS NOT NULL)
  AND coalesce(tenant, '') = coalesce($3::text, '')
LIMIT 1;

-- name: ensure_schedule
-- Register a schedule; a new one starts from $3 (no runs for ticks before it existed).
INSERT INTO schedules (workflow, cron, last_tick) VALUES ($1, $2, $3)
ON CONFLICT (workflow, cron) DO NOTHING;

-- name: lock_schedule
-- A schedule's last tick, locked for this transaction; no row when another scheduler holds it.
SELECT last_tick FROM schedules WHERE workflow = $1 AND cron = $2 FOR UPDATE SKIP LOCKED;

-- name: set_schedule_tick
-- Move a schedule's last tick (in the transaction that started the tick's runs).
UPDATE schedules SET last_tick = $3 WHERE workflow = $1 AND cron = $2;

-- name: insert_child_link
-- Link a child run to its parent (migration 0005): its end will be signalled to the parent.
INSERT INTO child_runs (child_id, parent_id, step) VALUES ($1, $2, $3);

-- name: rotate_page_executions
-- Key rotation (`tether keys rotate`): the next page of runs' payloads after id $1.
SELECT id, input, output FROM executions WHERE id > $1 ORDER BY id LIMIT $2;

-- name: reseal_executions
-- Key rotation: write re-sealed payloads ($1: [{id, input?, old_input?, output?, old_output?}]);
-- a column is written only while it still holds what was read (a write meanwhile wins).
UPDATE executions e SET
    input  = CASE WHEN u.input IS NOT NULL AND e.input = u.old_input THEN u.input
                  ELSE e.input END,
    output = CASE WHEN u.output IS NOT NULL AND e.output = u.old_output THEN u.output
                  ELSE e.output END
FROM jsonb_to_recordset($1::jsonb)
     AS u(id text, input jsonb, old_input jsonb, output jsonb, old_output jsonb)
WHERE e.id = u.id
  AND ((u.input IS NOT NULL AND e.input = u.old_input)
       OR (u.output IS NOT NULL AND e.output = u.old_output))
RETURNING e.id;

-- name: rotate_page_steps
-- Key rotation: the next page of step results after ($1, $2).
SELECT execution_id, seq, result FROM steps
WHERE (execution_id, seq) > ($1, $2) ORDER BY execution_id, seq LIMIT $3;

-- name: reseal_steps
-- Key rotation: write re-sealed step results ($1: [{execution_id, seq, result, old}]).
UPDATE steps s SET result = u.result
FROM jsonb_to_recordset($1::jsonb) AS u(execution_id text, seq integer, result jsonb, old jsonb)
WHERE s.execution_id = u.execution_id AND s.seq = u.seq AND s.result = u.old
RETURNING s.execution_id, s.seq;

-- name: rotate_page_signals
-- Key rotation: the next page of signal payloads after id $1.
SELECT id, execution_id, channel, key, payload FROM signals WHERE id > $1 ORDER BY id LIMIT $2;

-- name: reseal_signals
-- Key rotation: write re-sealed signal payloads ($1: [{id, payload, old}]).
UPDATE signals s SET payload = u.payload
FROM jsonb_to_recordset($1::jsonb) AS u(id bigint, payload jsonb, old jsonb)
WHERE s.id = u.id AND s.payload = u.old
RETURNING s.id;

-- name: rotate_page_updates
-- Key rotation: the next page of updates' payloads after id $1.
SELECT id, execution_id, input, output FROM updates WHERE id > $1 ORDER BY id LIMIT $2;

-- name: reseal_updates
-- Key rotation: write re-sealed update payloads (as reseal_executions).
UPDATE updates d SET
    input  = CASE WHEN u.input IS NOT NULL AND d.input = u.old_input THEN u.input
                  ELSE d.input END,
    output = CASE WHEN u.output IS NOT NULL AND d.output = u.old_output THEN u.output
                  ELSE d.output END
FROM jsonb_to_recordset($1::jsonb)
     AS u(id text, input jsonb, old_input jsonb, output jsonb, old_output jsonb)
WHERE d.id = u.id
  AND ((u.input IS NOT NULL AND d.input = u.old_input)
       OR (u.output IS NOT NULL AND d.output = u.old_output))
RETURNING d.id;

-- name: status_counts
-- Observability: runs by status for the `tether_runs` gauge (one grouped count,
-- cached by the scraper for a second).
SELECT status, count(*)::integer AS n FROM executions GROUP BY status;

-- name: queue_backlog
-- Runnable runs not yet claimed, by admission queue ('' outside any), with the age of the
-- oldest: due runs (the claim's wake_at index; a running row is due only once its lease
-- expired) and queued runs waiting for a slot (the executions_queued index).
SELECT queue, count(*)::integer AS depth,
       coalesce(extract(epoch FROM tether_now() - min(since)), 0)::float8 AS oldest_age_s
FROM (
    SELECT coalesce(queue, '') AS queue, wake_at AS since FROM executions
    WHERE wake_at <= tether_now()
    UNION ALL
    SELECT queue, created_at FROM executions
    WHERE queue IS NOT NULL AND admitted_at IS NULL AND ended_at IS NULL
) runnable
GROUP BY queue;

-- name: notification_backlog
-- Notifications neither delivered nor given up (next_at set: due, waiting for a retry, or
-- claimed), by channel, with the age of the oldest; every channel the routes name is listed,
-- with 0 when it has none, and so is a channel no route names any more that still has some.
SELECT c.channel, count(o.id)::integer AS pending,
       coalesce(extract(epoch FROM tether_now() - min(o.created_at)), 0)::float8 AS oldest_age_s
FROM (
    SELECT channel FROM notify_routes
    UNION
    SELECT channel FROM outbox WHERE next_at IS NOT NULL
) c
LEFT JOIN outbox o ON o.channel = c.channel AND o.next_at IS NOT NULL
GROUP BY c.channel;

-- name: applied_migration
SELECT coalesce(max(version), 0) FROM schema_migrations;

-- name: run_clock_ahead
-- Make this database's clock (tether_now(), migration 0008) one that runs ahead of now() by
-- an amount set with set_clock_ahead, starting at zero: time skipping in tether.testing, only
-- ever on a test's own database. Run once per database.
CREATE TABLE tether_clock_ahead (
    one   boolean  PRIMARY KEY DEFAULT true CHECK (one),
    ahead interval NOT NULL
);
INSERT INTO tether_clock_ahead (ahead) VALUES (interval '0');
CREATE OR REPLACE FUNCTION tether_now() RETURNS timestamptz
LANGUAGE sql STABLE
AS $$ SELECT now() + (SELECT ahead FROM tether_clock_ahead) $$;

-- name: set_clock_ahead
-- How far the clock run_clock_ahead made runs ahead of now(): $1 (never less than before).
UPDATE tether_clock_ahead SET ahead = greatest(ahead, $1::interval);

-- name: wake_due_runs
-- Wake the workers for every run due now (after the clock moved ahead); the runs' ids.
SELECT id, pg_notify('tether_ready', id)::text AS notified FROM executions
WHERE wake_at <= tether_now();

-- name: clock_outlook
-- What a skipping clock needs to know: the database's time; whether a run is due or held by a
-- worker now (except a run named in $1 as `id:attempt`: its worker died on that attempt and
-- its lease only waits to expire); and the earliest wake-up after now (NULL: none).
SELECT tether_now() AS now,
       EXISTS (SELECT 1 FROM executions
               WHERE wake_at <= tether_now()
                  OR (status = 'running' AND NOT (id || ':' || attempt) = ANY($1::text[])))
           AS busy,
       (SELECT min(wake_at) FROM executions WHERE wake_at > tether_now()) AS next_wake;

-- name: schedule_remote_poll
-- Poll the remote task of run $1's call $2 at $3 (runtime/remote: the call parks on it).
INSERT INTO remote_polls (execution_id, seq, due_at) VALUES ($1, $2, $3)
ON CONFLICT (execution_id, seq) DO UPDATE SET due_at = EXCLUDED.due_at;

-- name: claim_remote_polls
-- Take up to $1 due remote polls for $2 seconds (due again then, should the poller die), each
-- with its call's record and its run's status.
WITH due AS (
    SELECT execution_id, seq FROM remote_polls
    WHERE due_at <= tether_now()
    ORDER BY due_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), taken AS (
    UPDATE remote_polls p SET due_at = tether_now() + make_interval(secs => $2)
    FROM due WHERE p.execution_id = due.execution_id AND p.seq = due.seq
    RETURNING p.execution_id, p.seq
)
SELECT t.execution_id, t.seq, e.status, s.kind, s.name, s.result, s.done
FROM taken t
JOIN executions e ON e.id = t.execution_id
LEFT JOIN steps s ON s.execution_id = t.execution_id AND s.seq = t.seq;

-- name: reschedule_remote_polls
-- Polls due again: run $1[i]'s call $2[i] at now + $3[i] seconds.
UPDATE remote_polls p SET due_at = tether_now() + make_interval(secs => v.after)
FROM unnest($1::text[], $2::integer[], $3::double precision[]) AS v(execution_id, seq, after)
WHERE p.execution_id = v.execution_id AND p.seq = v.seq;

-- name: hasten_remote_polls
-- Polls due now: run $1[i]'s call $2[i] (its remote told of a change before the poll was due).
UPDATE remote_polls p SET due_at = tether_now()
FROM unnest($1::text[], $2::integer[]) AS v(execution_id, seq)
WHERE p.execution_id = v.execution_id AND p.seq = v.seq AND p.due_at > tether_now();

-- name: drop_remote_polls
-- Polls no longer needed: run $1[i]'s call $2[i] (ended, or its run was woken to look).
DELETE FROM remote_polls p
USING unnest($1::text[], $2::integer[]) AS v(execution_id, seq)
WHERE p.execution_id = v.execution_id AND p.seq = v.seq;

-- name: get_created
-- A run's `created` event (its first): who started it, or the run it continues or was
-- started by (a child's parent).
SELECT data FROM history WHERE execution_id = $1 AND event_id = 1;

-- name: link_used
-- Whether an approval link's nonce has acted already.
SELECT EXISTS (SELECT 1 FROM link_uses WHERE nonce = $1);

-- name: use_link
-- Mark an approval link used, in the transaction of the answer it gives (no row back: it was
-- used before).
INSERT INTO link_uses (nonce, execution_id, key, approver) VALUES ($1, $2, $3, $4)
ON CONFLICT (nonce) DO NOTHING
RETURNING nonce;

-- The database's one clock. Every statement that decides whether something is due (a timer, a
-- wait's deadline, a retry's backoff, an expired lease) or stamps a time reads tether_now(),
-- never now() itself (tests/storage/test_clock.py checks queries.sql for it). Here it is now():
-- a one-expression SQL function, which the planner inlines, so every query plans and runs as it
-- did with now(). A test database may replace it with a clock that runs ahead (time skipping in
-- tether.testing: queries.sql, run_clock_ahead); nothing else redefines it.
CREATE FUNCTION tether_now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT now() $$;

-- Times stamped by default read the same clock.
ALTER TABLE executions
    ALTER COLUMN created_at SET DEFAULT tether_now(),
    ALTER COLUMN updated_at SET DEFAULT tether_now();
ALTER TABLE history ALTER COLUMN at SET DEFAULT tether_now();
ALTER TABLE steps ALTER COLUMN at SET DEFAULT tether_now();
ALTER TABLE signals ALTER COLUMN at SET DEFAULT tether_now();
ALTER TABLE updates ALTER COLUMN admitted_at SET DEFAULT tether_now();
ALTER TABLE api_tokens ALTER COLUMN created_at SET DEFAULT tether_now();
ALTER TABLE audit ALTER COLUMN at SET DEFAULT tether_now();

-- tether_append_event as 0002 made it, reading tether_now().
CREATE OR REPLACE FUNCTION tether_append_event(p_id text, p_type text, p_data jsonb)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_event bigint;
BEGIN
    UPDATE executions SET
        last_event_id = last_event_id + 1,
        version       = version + 1,
        updated_at    = tether_now(),
        waits         = CASE WHEN status = 'waiting' THEN '[]'::jsonb ELSE waits END,
        wake_at       = CASE WHEN status = 'waiting' THEN tether_now() ELSE wake_at END,
        status        = CASE WHEN status = 'waiting' THEN 'pending' ELSE status END
    WHERE id = p_id AND ended_at IS NULL
    RETURNING last_event_id INTO v_event;
    IF v_event IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO history (execution_id, event_id, type, data) VALUES (p_id, v_event, p_type, p_data);
    PERFORM pg_notify('tether_ready', p_id);
    PERFORM pg_notify('tether_change', p_id);
    RETURN v_event;
END
$$;

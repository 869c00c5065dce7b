-- One place that appends an event from outside the run (a signal, an answer, an update, a cancel
-- request): bump the position and the version, re-open a parked run so the worker re-parks it
-- with new wait keys (a key carries the run's last event id), record the event, and wake
-- workers and watchers.
-- Returns the new event id, or NULL when the run does not exist or has ended.
CREATE FUNCTION tether_append_event(p_id text, p_type text, p_data jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_event bigint;
BEGIN
    UPDATE executions SET
        last_event_id = last_event_id + 1,
        version       = version + 1,
        updated_at    = now(),
        waits         = CASE WHEN status = 'waiting' THEN '[]'::jsonb ELSE waits END,
        wake_at       = CASE WHEN status = 'waiting' THEN now() ELSE wake_at END,
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

-- Child runs (a DAG step's sub-DAG run, or any run a workflow starts and then waits for): a
-- link from the child to its parent, and a trigger that tells the parent when the child ends.
-- However the child ends (a worker's checkpoint, terminate, the poison guard), the same
-- statement that ends it buffers a signal on the parent's channel 'child:<child id>' and
-- appends a `child_ended` event, which wakes a parked parent (tether_append_event).
CREATE TABLE child_runs (
    child_id  text PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
    parent_id text NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    step      text NOT NULL
);
CREATE INDEX child_runs_parent ON child_runs (parent_id);

CREATE FUNCTION tether_child_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_parent text;
BEGIN
    SELECT parent_id INTO v_parent FROM child_runs WHERE child_id = NEW.id;
    IF v_parent IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO signals (execution_id, channel, key, payload)
    VALUES (v_parent, 'child:' || NEW.id, 'child:' || NEW.id,
            jsonb_build_object('status', NEW.status, 'output', NEW.output, 'error', NEW.error))
    ON CONFLICT DO NOTHING;
    PERFORM tether_append_event(v_parent, 'child_ended',
                                jsonb_build_object('child', NEW.id, 'status', NEW.status));
    RETURN NULL;
END
$$;

CREATE TRIGGER executions_child_ended
    AFTER UPDATE OF ended_at ON executions
    FOR EACH ROW
    WHEN (OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL)
    EXECUTE FUNCTION tether_child_ended();

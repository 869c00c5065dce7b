-- Notifications to people (docs/notify-people.md): when a wait opens, is answered or expires,
-- or a run that asked something ends, the transaction that does it also writes one outbox row
-- per channel (and recipient) that should hear of it. Triggers write the rows, so no statement
-- that parks, answers or ends a run names the outbox; senders in each serve and worker process
-- claim the rows, deliver them and mark them sent.
--
-- notify_routes: which workflow ('*': every workflow) tells which channel and recipient of which
-- events, and of the opening of which kinds of wait. Every serve and worker process writes the
-- routes its configuration declares when it starts (one configuration per database).
CREATE TABLE notify_routes (
    workflow  text   NOT NULL CHECK (workflow <> ''),
    channel   text   NOT NULL CHECK (channel <> ''),
    recipient text   NOT NULL DEFAULT '',
    events    text[] NOT NULL,
    kinds     text[] NOT NULL,
    PRIMARY KEY (workflow, channel, recipient)
);

-- outbox: one notification to deliver to one channel's recipient. `subject` names what it is
-- about within its run (a wait opened: kind:name:opened_at, the same however often the run
-- parks on it again; an answer: the wait's key; an expiry: its history event), so each is
-- written once. next_at: when it is due (pending), or when the claim of the sender holding it
-- runs out (claimed_by; a sender that died is taken over then); NULL once sent or given up.
-- delivery_id is what the receiver sees (Tether-Delivery-Id) and may deduplicate on.
CREATE TABLE outbox (
    id           bigserial   PRIMARY KEY,
    delivery_id  text        NOT NULL UNIQUE
                             DEFAULT 'dl_' || replace(gen_random_uuid()::text, '-', ''),
    channel      text        NOT NULL,
    recipient    text        NOT NULL DEFAULT '',
    event        text        NOT NULL CHECK (event IN (
                                 'wait.opened', 'wait.answered', 'wait.expired', 'run.ended')),
    execution_id text        NOT NULL,
    subject      text        NOT NULL,
    data         jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT tether_now(),
    next_at      timestamptz DEFAULT tether_now(),
    attempts     integer     NOT NULL DEFAULT 0,
    claimed_by   text,
    sent_at      timestamptz,
    failed_at    timestamptz,
    last_error   text,
    -- also the triggers' lookup of a run's announced waits (execution_id, event)
    UNIQUE (execution_id, event, subject, channel, recipient)
);
-- Senders claim by next_at: pending rows and expired claims (sent rows leave the index).
CREATE INDEX outbox_due ON outbox (next_at) WHERE next_at IS NOT NULL;
-- Retention of delivered rows.
CREATE INDEX outbox_created ON outbox (created_at);

-- The run as a notification names it.
CREATE FUNCTION tether_outbox_run(p_run executions) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', p_run.id, 'workflow', p_run.workflow,
                              'business_id', p_run.business_id, 'tenant', p_run.tenant,
                              'status', p_run.status)
$$;

-- A run parked on waits: one `wait.opened` per routed channel and recipient for each wait it
-- was not told of already (a run parks on a wait again under a new key whenever an unrelated
-- event reaches it; the wait's kind, name and opened_at stay, and so does the subject).
CREATE FUNCTION tether_outbox_waits() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_count bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM notify_routes WHERE workflow IN (NEW.workflow, '*')) THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbox (channel, recipient, event, execution_id, subject, data)
    SELECT r.channel, r.recipient, 'wait.opened', NEW.id,
           concat_ws(':', w->>'kind', w->>'name', w->>'opened_at'),
           jsonb_build_object('run', tether_outbox_run(NEW), 'wait', w)
    FROM jsonb_array_elements(NEW.waits) AS w
    JOIN notify_routes r ON r.workflow IN (NEW.workflow, '*')
                        AND 'wait.opened' = ANY (r.events)
                        AND w->>'kind' = ANY (r.kinds)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        PERFORM pg_notify('tether_outbox', '');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER executions_outbox_waits
    AFTER UPDATE OF waits ON executions
    FOR EACH ROW
    WHEN (NEW.status = 'waiting' AND NEW.waits <> '[]'::jsonb
          AND NEW.waits IS DISTINCT FROM OLD.waits)
    EXECUTE FUNCTION tether_outbox_waits();

-- A wait answered (`answer` event: its key and who answered) or expired (`wait_timed_out`:
-- the channels kind:name of the waits given up on): tell each channel and recipient that was
-- told of the wait opening and whose route still takes the event. The notification carries
-- the wait as it was announced, and an answer's decision when the stored answer shows it
-- (not when payloads are sealed at rest).
CREATE FUNCTION tether_outbox_history() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_run      executions;
    v_event    text;
    v_targets  jsonb;
    v_key      text;
    v_rest     text;
    v_answer   jsonb := NULL;
    v_payload  jsonb;
    v_count    bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM outbox
                   WHERE execution_id = NEW.execution_id AND event = 'wait.opened') THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_run FROM executions WHERE id = NEW.execution_id;
    IF NEW.type = 'answer' THEN
        v_event := 'wait.answered';
        v_key := NEW.data->>'key';
        -- {run id}:{kind}:{name}:{n}; a name may hold ':', the run id and the kind do not
        v_rest := substr(v_key, length(NEW.execution_id) + 2);
        v_targets := jsonb_build_array(jsonb_build_object(
            'kind', split_part(v_rest, ':', 1),
            'name', regexp_replace(substr(v_rest, length(split_part(v_rest, ':', 1)) + 2),
                                   ':[0-9]+$', ''),
            'subject', v_key));
        SELECT payload INTO v_payload FROM signals
        WHERE execution_id = NEW.execution_id AND key = v_key;
        v_answer := jsonb_build_object('key', v_key, 'by', NEW.data->'by', 'decision',
            CASE WHEN jsonb_typeof(v_payload) = 'object' AND NOT v_payload ? '$enc'
                      AND v_payload->>'decision' IN ('approve', 'reject', 'push_back', 'complete')
                 THEN v_payload->'decision' END);
    ELSE
        v_event := 'wait.expired';
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'kind', split_part(c, ':', 1),
                   'name', substr(c, length(split_part(c, ':', 1)) + 2),
                   'subject', c || ':' || NEW.event_id)), '[]'::jsonb)
        INTO v_targets
        FROM jsonb_array_elements_text(coalesce(NEW.data->'waits', '[]'::jsonb)) AS c;
    END IF;
    INSERT INTO outbox (channel, recipient, event, execution_id, subject, data)
    SELECT DISTINCT ON (o.channel, o.recipient, t->>'subject')
           o.channel, o.recipient, v_event, NEW.execution_id, t->>'subject',
           jsonb_build_object('run', tether_outbox_run(v_run), 'wait', o.data->'wait')
           || CASE WHEN v_answer IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('answer', v_answer) END
    FROM jsonb_array_elements(v_targets) AS t
    JOIN outbox o ON o.execution_id = NEW.execution_id AND o.event = 'wait.opened'
                 AND o.data->'wait'->>'kind' = t->>'kind'
                 AND o.data->'wait'->>'name' = t->>'name'
    JOIN notify_routes r ON r.channel = o.channel AND r.recipient = o.recipient
                        AND r.workflow IN (v_run.workflow, '*') AND v_event = ANY (r.events)
    ORDER BY o.channel, o.recipient, t->>'subject', o.id DESC
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        PERFORM pg_notify('tether_outbox', '');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER history_outbox
    AFTER INSERT ON history
    FOR EACH ROW
    WHEN (NEW.type IN ('answer', 'wait_timed_out'))
    EXECUTE FUNCTION tether_outbox_history();

-- A run ended (however: its worker settled it, a cancel, terminate, a rejection, the poison
-- guard): tell each channel and recipient that was told of one of its waits, once.
CREATE FUNCTION tether_outbox_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_count bigint;
BEGIN
    INSERT INTO outbox (channel, recipient, event, execution_id, subject, data)
    SELECT DISTINCT o.channel, o.recipient, 'run.ended', NEW.id, '',
           jsonb_build_object('run', tether_outbox_run(NEW))
    FROM outbox o
    JOIN notify_routes r ON r.channel = o.channel AND r.recipient = o.recipient
                        AND r.workflow IN (NEW.workflow, '*') AND 'run.ended' = ANY (r.events)
    WHERE o.execution_id = NEW.id AND o.event = 'wait.opened'
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        PERFORM pg_notify('tether_outbox', '');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER executions_outbox_ended
    AFTER UPDATE OF ended_at ON executions
    FOR EACH ROW
    WHEN (OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL)
    EXECUTE FUNCTION tether_outbox_ended();

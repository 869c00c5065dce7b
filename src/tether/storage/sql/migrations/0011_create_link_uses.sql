-- link_uses: the approval links that have acted (runtime/links.py). A link's nonce is inserted
-- in the same transaction as the answer it gives, so a link acts at most once; the row goes
-- with its run.
CREATE TABLE link_uses (
    nonce        text        PRIMARY KEY,
    execution_id text        NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    key          text        NOT NULL,
    approver     text        NOT NULL,
    used_at      timestamptz NOT NULL DEFAULT tether_now()
);
CREATE INDEX link_uses_execution ON link_uses (execution_id);

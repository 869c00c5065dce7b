"""The queries file's parts (storage/queries.py): a `-- part:` block is included where a query
or another part names it, with its parameters renumbered on request, and the checkpoint and
claim statements are built from the same parts, so each rule they share is written once."""

from __future__ import annotations

import pytest

from tether.storage import queries
from tether.storage.queries import Q
from tether.storage.rows import ENDED_STATUSES

FILE = """
-- part: fence
-- Only the lease holder writes.
e.owner = $1 AND e.attempt = $2

-- part: touch
-- Two assignments.
version = e.version + 1,
seen    = $3

-- name: write
-- A query including a part inside a line, and one on lines of its own.
UPDATE executions e SET
    {{ touch }}
WHERE {{fence}};

-- name: write_later
-- The same part, its parameters numbered from $4.
UPDATE executions e SET
    {{ touch from $4 }}
WHERE e.id = $1 AND {{ fence from $4 }};
"""


def test_a_part_is_included_where_named_and_indented_as_the_line_naming_it() -> None:
    """Our choice: the part's text replaces `{{ name }}`, its comment lines dropped and its
    later lines indented as the line that includes it; parts are not queries."""
    found = queries.parse(FILE)
    assert found == {
        "write": (
            "UPDATE executions e SET\n"
            "    version = e.version + 1,\n"
            "    seen    = $3\n"
            "WHERE e.owner = $1 AND e.attempt = $2"
        ),
        "write_later": (
            "UPDATE executions e SET\n"
            "    version = e.version + 1,\n"
            "    seen    = $6\n"
            "WHERE e.id = $1 AND e.owner = $4 AND e.attempt = $5"
        ),
    }


def test_a_part_may_include_parts_and_a_shift_renumbers_all_it_holds() -> None:
    """Our choice: `from $N` applies to the part as expanded, the parts it includes too."""
    text = (
        "-- part: inner\n$1 + $2\n"
        "-- part: outer\n($3, {{ inner }})\n"
        "-- name: q\nSELECT {{ outer from $10 }}, {{ inner }}\n"
    )
    assert queries.parse(text) == {"q": "SELECT ($12, $10 + $11), $1 + $2"}


def test_given_parts_are_included_like_the_files_own() -> None:
    """Our choice: a part given from Python (`queries.GIVEN`) is included like one in the file."""
    text = "-- name: q\nSELECT 1 WHERE 'a' IN ({{ letters }})\n"
    got = queries.parse(text, {"letters": queries.sql_strings(["b", "it's", "a"])})
    assert got == {"q": "SELECT 1 WHERE 'a' IN ('a', 'b', 'it''s')"}


@pytest.mark.parametrize(
    "text",
    [
        "-- name: q\nSELECT {{ nowhere }}\n",
        "-- part: p\n1\n-- name: q\nSELECT 2\n",
        "-- part: p\n{{ p }}\n-- name: q\nSELECT {{ p }}\n",
        "-- part: p\n1\n-- name: p\nSELECT {{ p }}\n",
        "-- part: p\n1\n-- part: p\n2\n-- name: q\nSELECT {{ p }}\n",
        "-- part: p\n1 -- one\n-- name: q\nSELECT {{ p }}, 2\n",
        "-- part: p\n1\n-- name: q\nSELECT {{ p }}, {{ P }}\n",
        "-- part: p\n-- nothing but a comment\n-- name: q\nSELECT {{ p }}\n",
    ],
    ids=[
        "unknown",
        "unused",
        "includes-itself",
        "shares-a-query-name",
        "defined-twice",
        "inline-comment",
        "not-a-part-name",
        "empty",
    ],
)
def test_a_part_that_cannot_be_included_as_written_is_refused_at_load(text: str) -> None:
    """Our choice: a part unknown, unused, self-including, defined twice, empty, or holding an
    inline comment, and an inclusion naming no part, are load-time errors."""
    with pytest.raises(ValueError):
        queries.parse(text)


def test_the_queries_read_the_ended_statuses_from_the_runtime_definition() -> None:
    """Our choice: the statuses that end a run are given to the queries from
    `rows.ENDED_STATUSES`; no query spells a status list of its own."""
    assert queries.GIVEN["ended_statuses"] == queries.sql_strings(ENDED_STATUSES)
    listed = f"IN ({queries.GIVEN['ended_statuses']})"
    for name in ("checkpoint", "checkpoint_step", "checkpoint_one", "checkpoint_many"):
        assert listed in Q[name]
    spelled = [name for name, sql in Q.items() if "'completed', 'failed'" in sql]
    assert spelled == []


def _after(query: str, marker: str) -> str:
    return query[query.index(marker) :]


def test_the_checkpoint_statements_share_one_transition() -> None:
    """Our choice: `checkpoint`, `checkpoint_one` and `checkpoint_many` write with the same
    text from their `lease` CTE on, and the one-write and many-write statements differ only in
    the CTEs that read their parameters."""
    lease = "), lease AS ("
    write = _after(Q["checkpoint"], lease)
    write = write[: write.index("), notes AS (")]
    one, many = _after(Q["checkpoint_one"], lease), _after(Q["checkpoint_many"], lease)
    assert one == many
    assert one.startswith(write)

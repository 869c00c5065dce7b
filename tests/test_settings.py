"""Secret settings stay secret: no value of one appears in a repr or str of `Settings`, and a
bad value gets an error naming the variable, never echoing the value."""

from __future__ import annotations

import base64

import pytest
from pydantic import ValidationError

from tether.security.tokens import parse_tokens
from tether.settings import MASK, SECRETS, Settings, SettingsError, redacted_url

PASSWORD = "pw-Zq81xK"  # noqa: S105 — a made-up value the tests look for
SECRET_VALUES = {
    "database_url": f"postgresql://tether:{PASSWORD}@db.example:5432/tether",
    "listen_database_url": f"postgresql://tether:{PASSWORD}@db-direct.example:5432/tether",
    "state_key": "state-Hn3cVb",
    "api_tokens": "ci:operator:" + "ab" * 32,
    "encryption_keys": "k1:" + base64.b64encode(b"K" * 32).decode(),
    "profiles": '{"prod": {"env": {"API_TOKEN": "env-Tq5wPe"}}}',
    "remotes": '{"billing": {"url": "https://b.example/mcp", "headers": {"X-Key": "hdr-Wq2mZr"}}}',
}
NEEDLES = (
    PASSWORD,
    "state-Hn3cVb",
    "ab" * 32,
    base64.b64encode(b"K" * 32).decode(),
    "env-Tq5wPe",
    "hdr-Wq2mZr",
)


def test_every_credential_setting_is_listed_as_a_secret() -> None:
    """The values this module checks are every setting the module marks secret."""
    assert set(SECRET_VALUES) == SECRETS


def test_repr_and_str_show_no_secret_value() -> None:
    """Our choice: a set secret shows as the mask; the database URL keeps its user, host and
    database (what an operator needs to see) with the password masked."""
    settings = Settings.from_env({f"TETHER_{k.upper()}": v for k, v in SECRET_VALUES.items()})
    for shown in (repr(settings), str(settings), f"{settings}", f"{settings!r}"):
        for needle in NEEDLES:
            assert needle not in shown
        assert f"postgresql://tether:{MASK}@db.example:5432/tether" in shown
        assert f"postgresql://tether:{MASK}@db-direct.example:5432/tether" in shown
        assert f"state_key='{MASK}'" in shown
    assert settings.state_key == "state-Hn3cVb"  # masked for display only
    assert "state_key=None" in repr(Settings())  # an unset secret says so


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:p%40ss@h/d", f"postgresql://u:{MASK}@h/d"),
        ("postgresql://u@h:5432/d?password=qq&sslmode=require", None),
        ("postgresql://u:12/34@h/d", MASK),  # an unescaped '/' ends the host early
        ("not a url s3cret", MASK),
        ("postgresql:///d?host=/run/pg", "postgresql:///d?host=/run/pg"),
        ("postgresql://u@h1:5432,h2:5433/d", "postgresql://u@h1:5432,h2:5433/d"),
    ],
)
def test_a_database_url_shows_without_its_password(url: str, shown: str | None) -> None:
    """Our choice: the password goes, in the user part or in the query; a value that cannot be
    read as a URL is masked whole."""
    out = redacted_url(url)
    if shown is None:
        assert "qq" not in out and f"password={MASK}" in out and "sslmode=require" in out
    else:
        assert out == shown


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://tether:{PASSWORD}@db.example:notaport/tether",
        f"postgres//tether:{PASSWORD}@db.example/tether",
        f"mysql://tether:{PASSWORD}@db.example/tether",
        f"postgresql://tether:{PASSWORD}@[db.example/tether",
    ],
)
def test_a_malformed_database_url_names_the_variable_not_the_value(url: str) -> None:
    """Our choice: the URL is checked when settings are read, and the error says what is wrong
    without the URL (it holds the password); no chained error carries it either."""
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"TETHER_DATABASE_URL": url})
    message = str(caught.value)
    assert message.startswith("TETHER_DATABASE_URL: ")
    assert PASSWORD not in message and "db.example" not in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_a_bad_secret_of_any_kind_is_never_echoed() -> None:
    """Our choice: profiles (whose env may hold credentials), encryption keys and API token
    entries each name the variable when refused, never the value."""
    bad_profiles = '{"prod": {"env": {"API_TOKEN": "env-Tq5wPe"}}'  # one brace short
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"TETHER_PROFILES": bad_profiles})
    assert str(caught.value).startswith("TETHER_PROFILES: ")
    assert "env-Tq5wPe" not in str(caught.value)

    short_key = "k1:" + base64.b64encode(b"S" * 16).decode()
    settings = Settings.from_env({"TETHER_ENCRYPTION_KEYS": short_key})
    with pytest.raises(SettingsError) as sealed:
        settings.encryption()
    assert str(sealed.value).startswith("TETHER_ENCRYPTION_KEYS: ")
    assert base64.b64encode(b"S" * 16).decode() not in str(sealed.value)

    pasted = "tt_" + "Rk9" * 14  # a token where its configuration entry belongs
    with pytest.raises(ValueError, match="TETHER_API_TOKENS entry 2") as tokens:
        parse_tokens(f"ci:operator:{'ab' * 32},{pasted}")
    assert pasted not in str(tokens.value)


def test_a_validation_error_built_directly_hides_the_input() -> None:
    """Our choice: `Settings(...)` with a bad value (not through from_env) raises pydantic's
    error without the values it was given."""
    with pytest.raises(ValidationError) as caught:
        Settings.model_validate(
            {"database_url": f"postgresql://u:{PASSWORD}@h:x/d", "state_key": ["x-Hn3cVb"]}
        )
    assert PASSWORD not in str(caught.value) and "x-Hn3cVb" not in str(caught.value)


DIRECT = "postgresql://tether@db.internal:5432/tether"
POOLED = "postgresql://tether@pgbouncer.internal:6432/tether"


def test_a_transaction_pooler_turns_the_statement_cache_off_unless_one_is_set() -> None:
    """Our choice: behind TETHER_DATABASE_POOLER=transaction no prepared statement is cached
    (the next transaction may run on another server connection); an explicit
    TETHER_STATEMENT_CACHE_SIZE (a pooler that keeps prepared statements) wins; without a
    pooler, or in session mode, the driver's default stands."""
    pooled = {
        "TETHER_DATABASE_URL": POOLED,
        "TETHER_LISTEN_DATABASE_URL": DIRECT,
        "TETHER_DATABASE_POOLER": "transaction",
    }
    assert Settings.from_env(pooled).statement_cache() == 0
    assert (
        Settings.from_env({**pooled, "TETHER_STATEMENT_CACHE_SIZE": "100"}).statement_cache() == 100
    )
    assert Settings.from_env({"TETHER_DATABASE_URL": DIRECT}).statement_cache() is None
    session = {"TETHER_DATABASE_URL": POOLED, "TETHER_DATABASE_POOLER": "session"}
    assert Settings.from_env(session).statement_cache() is None
    explicit = {"TETHER_DATABASE_URL": DIRECT, "TETHER_STATEMENT_CACHE_SIZE": "0"}
    assert Settings.from_env(explicit).statement_cache() == 0


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        (
            {"TETHER_DATABASE_URL": POOLED, "TETHER_DATABASE_POOLER": "transaction"},
            "TETHER_DATABASE_POOLER",
        ),
        (
            {"TETHER_DATABASE_POOLER": "transaction", "TETHER_LISTEN_DATABASE_URL": DIRECT},
            "TETHER_LISTEN_DATABASE_URL",
        ),
        ({"TETHER_DATABASE_POOLER": "session"}, "TETHER_DATABASE_POOLER"),
        (
            {"TETHER_DATABASE_URL": POOLED, "TETHER_DATABASE_POOLER": "statement"},
            "TETHER_DATABASE_POOLER",
        ),
        (
            {"TETHER_DATABASE_URL": DIRECT, "TETHER_STATEMENT_CACHE_SIZE": "-1"},
            "TETHER_STATEMENT_CACHE_SIZE",
        ),
        (
            {
                "TETHER_DATABASE_URL": DIRECT,
                "TETHER_LISTEN_DATABASE_URL": f"mysql://u:{PASSWORD}@h/d",
            },
            "TETHER_LISTEN_DATABASE_URL",
        ),
    ],
)
def test_pooler_settings_that_cannot_work_are_refused_naming_the_variable(
    env: dict[str, str], variable: str
) -> None:
    """Our choice: a transaction pooler without a direct URL for LISTEN (it would hear
    nothing), a pooler or LISTEN URL without a database URL (the embedded server is direct),
    statement pooling (no transactions), a negative cache and a malformed LISTEN URL are
    refused when settings are read, naming the variable and never a password."""
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(env)
    message = str(caught.value)
    assert message.split(":")[0].split("=")[0] == variable
    assert PASSWORD not in message

"""The payload envelope (storage/sealing.py): AES-256-GCM bound to its place, key ids,
parsing of TETHER_ENCRYPTION_KEYS. Our choice (docs/operating.md, "Encryption at rest")."""

from __future__ import annotations

import base64

import pytest

from tether.storage import sealing
from tether.storage.errors import PayloadUnreadable, TamperedPayload, UnknownKey

K1 = sealing.new_key()
K2 = sealing.new_key()


def test_a_sealed_value_opens_at_its_own_place_only() -> None:
    """Round trip; the same ciphertext at another row or column fails authentication."""
    ring = sealing.KeyRing.parse(f"k1:{K1}")
    value = {"card": "4111-1111", "n": [1, 2.5, None, True]}
    env = sealing.seal(ring, value, sealing.execution_input("ex_a"))
    assert sealing.is_envelope(env) and env["kid"] == "k1" and env["$enc"] == "v1"
    assert "4111" not in str(env)
    assert sealing.unseal(ring, env, sealing.execution_input("ex_a")) == value
    for elsewhere in (sealing.execution_input("ex_b"), sealing.execution_output("ex_a")):
        with pytest.raises(TamperedPayload):
            sealing.unseal(ring, env, elsewhere)


def test_an_altered_ciphertext_or_nonce_fails_and_never_returns_data() -> None:
    ring = sealing.KeyRing.parse(f"k1:{K1}")
    where = sealing.step_result("ex_a", 3)
    env = sealing.seal(ring, "secret", where)
    raw = bytearray(base64.b64decode(env["c"]))
    raw[0] ^= 1
    for bad in (
        {**env, "c": base64.b64encode(bytes(raw)).decode()},
        {**env, "n": base64.b64encode(b"\0" * 12).decode()},
        {**env, "c": "not base64!"},
    ):
        with pytest.raises(TamperedPayload):
            sealing.unseal(ring, bad, where)
    # the key id is bound too: relabelled under another key of the ring, it fails
    both = sealing.KeyRing.parse(f"k2:{K2},k1:{K1}")
    with pytest.raises(TamperedPayload):
        sealing.unseal(both, {**env, "kid": "k2"}, where)


def test_old_keys_open_new_writes_use_the_first_and_a_missing_key_is_named() -> None:
    old = sealing.KeyRing.parse(f"k1:{K1}")
    env = sealing.seal(old, 42, "ctx")
    rotated = sealing.KeyRing.parse(f"k2:{K2}, k1:{K1}")
    assert rotated.current == "k2"
    assert sealing.unseal(rotated, env, "ctx") == 42
    assert sealing.seal(rotated, 42, "ctx")["kid"] == "k2"
    assert sealing.needs_sealing(rotated, env) and sealing.needs_sealing(rotated, {"plain": 1})
    assert not sealing.needs_sealing(rotated, sealing.seal(rotated, 1, "ctx"))
    assert not sealing.needs_sealing(rotated, None)
    with pytest.raises(UnknownKey):
        sealing.unseal(sealing.KeyRing.parse(f"k2:{K2}"), env, "ctx")
    with pytest.raises(UnknownKey):
        sealing.unseal(None, env, "ctx")  # encryption off, an envelope met: never passed on
    assert issubclass(UnknownKey, PayloadUnreadable)


def test_plaintext_and_null_pass_through() -> None:
    """Rows from before encryption was on read as they are; None is never sealed."""
    ring = sealing.KeyRing.parse(f"k1:{K1}")
    assert sealing.seal(ring, None, "ctx") is None
    assert sealing.unseal(ring, {"a": 1}, "ctx") == {"a": 1}
    assert sealing.unseal(ring, {"$enc": "v1", "other": 1}, "ctx") == {"$enc": "v1", "other": 1}


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("", "no encryption key"),
        ("k1", "expected kid:base64key"),
        ("bad id:" + K1, "expected kid:base64key"),
        ("k1:!!!", "not valid base64"),
        ("k1:" + base64.b64encode(b"short").decode(), "must be 32 bytes"),
        (f"k1:{K1},k1:{K2}", "appears twice"),
    ],
    ids=["empty", "no-key", "bad-id", "bad-base64", "short-key", "twice"],  # keys are random
)
def test_a_bad_key_setting_is_refused_by_name_without_echoing_keys(spec: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as info:
        sealing.KeyRing.parse(spec)
    assert K1 not in str(info.value) and K2 not in str(info.value)


def test_install_nests_and_uninstall_restores() -> None:
    a = sealing.KeyRing.parse(f"a:{K1}")
    b = sealing.KeyRing.parse(f"b:{K2}")
    assert sealing.ring() is None
    off_a = sealing.install(a)
    off_b = sealing.install(b)
    assert sealing.ring() is b
    off_a()
    assert sealing.ring() is b
    off_b()
    assert sealing.ring() is None

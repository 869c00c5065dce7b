"""Payloads at rest: an AEAD envelope around each stored payload (inputs, outputs, answers,
update inputs and results, step results), with key ids and rotation.

A sealed value is stored in its jsonb column as the envelope

    {"$enc": "v1", "kid": "k2", "n": "<nonce, base64>", "c": "<ciphertext + tag, base64>"}

sealed with AES-256-GCM under the key `kid`. The associated data binds the ciphertext to its
place: the format version, the key id and the column's context (table, column, execution id
and whatever else names the row: a step's seq, a signal's channel and key, an update's id). A
ciphertext copied to another row or column, or altered, fails authentication: the read raises
`PayloadUnreadable`, it never returns another row's data.

The key ring is installed once per process (`install`), by the wiring that reads the settings;
storage imports nothing else from tether. With no ring installed nothing is sealed or opened
and every hot path pays one `is None` check. A value that is not an envelope (a row written
before encryption was turned on) reads as it is; `tether keys rotate` seals it.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tether.storage.errors import TamperedPayload, UnknownKey

VERSION: Final = "v1"
KEY_BYTES: Final = 32  # AES-256
NONCE_BYTES: Final = 12  # 96-bit random nonces: safe for well under 2**32 writes per key
ENVELOPE_KEYS: Final = frozenset({"$enc", "kid", "n", "c"})
_KID: Final = re.compile(r"[A-Za-z0-9_.-]{1,32}")


@dataclass(frozen=True)
class KeyRing:
    """Keys by id; `current` seals every new write, every key opens."""

    current: str
    keys: Mapping[str, AESGCM]

    @classmethod
    def parse(cls, spec: str) -> KeyRing:
        """`"k2:<base64 32 bytes>,k1:<base64>"` (the first is current).

        Raises ValueError naming the bad entry (never echoing key material)."""
        keys: dict[str, AESGCM] = {}
        order: list[str] = []
        for index, entry in enumerate(e.strip() for e in spec.split(",")):
            if not entry:
                continue
            kid, sep, material = entry.partition(":")
            if not sep or not _KID.fullmatch(kid):
                raise ValueError(
                    f"encryption key entry {index + 1}: expected kid:base64key, "
                    "the kid 1-32 letters, digits, '_', '.', '-'"
                )
            if kid in keys:
                raise ValueError(f"encryption key id {kid!r} appears twice")
            keys[kid] = AESGCM(_key_bytes(kid, material))
            order.append(kid)
        if not order:
            raise ValueError("no encryption key given")
        return cls(order[0], keys)


def _key_bytes(kid: str, material: str) -> bytes:
    try:
        raw = base64.b64decode(material.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"encryption key {kid!r} is not valid base64") from None
    if len(raw) != KEY_BYTES:
        raise ValueError(f"encryption key {kid!r} must be {KEY_BYTES} bytes, not {len(raw)}")
    return raw


def new_key() -> str:
    """A fresh random key, base64 (`tether keys new`)."""
    return base64.b64encode(AESGCM.generate_key(bit_length=KEY_BYTES * 8)).decode()


def is_envelope(value: Any) -> bool:
    return type(value) is dict and value.keys() == ENVELOPE_KEYS and value["$enc"] == VERSION


def _aad(kid: str, context: str) -> bytes:
    return f"tether/{VERSION}|{kid}|{context}".encode()


def seal(ring: KeyRing, value: Any, context: str) -> Any:
    """The envelope of `value` under the current key (None stays None: SQL NULL and JSON null
    hide nothing)."""
    if value is None:
        return None
    kid = ring.current
    nonce = os.urandom(NONCE_BYTES)
    sealed = ring.keys[kid].encrypt(nonce, orjson.dumps(value), _aad(kid, context))
    return {
        "$enc": VERSION,
        "kid": kid,
        "n": base64.b64encode(nonce).decode(),
        "c": base64.b64encode(sealed).decode(),
    }


def unseal(ring: KeyRing | None, value: Any, context: str) -> Any:
    """The plaintext of an envelope stored at `context`; any other value as it is.

    Raises UnknownKey (no ring, or not its key id), TamperedPayload (authentication failed:
    altered, or moved from another row or column)."""
    if not is_envelope(value):
        return value
    kid = value["kid"]
    key = ring.keys.get(kid) if ring is not None else None
    if key is None:
        raise UnknownKey(f"a stored payload ({context}) is sealed with key {kid!r}, not configured")
    try:
        nonce = base64.b64decode(value["n"], validate=True)
        plain = key.decrypt(nonce, base64.b64decode(value["c"], validate=True), _aad(kid, context))
    except (InvalidTag, binascii.Error, ValueError, TypeError):
        raise TamperedPayload(
            f"a stored payload ({context}) failed authentication: altered, or moved from "
            "another row or column"
        ) from None
    return orjson.loads(plain)


def stored(value: Any, context: Callable[..., str], *where: Any) -> Any:
    """`value` as it is written: sealed at `context(*where)` when a key ring is installed."""
    current = ring()
    return value if current is None else seal(current, value, context(*where))


def needs_sealing(ring: KeyRing, value: Any) -> bool:
    """Whether rotation rewrites this stored value: plaintext, or sealed under an old key."""
    if value is None:
        return False
    return not is_envelope(value) or value["kid"] != ring.current


# --- the contexts (associated data) of each sealed column -------------------------------------


def execution_input(execution_id: str) -> str:
    return f"executions.input|{execution_id}"


def execution_output(execution_id: str) -> str:
    return f"executions.output|{execution_id}"


def step_result(execution_id: str, seq: int) -> str:
    return f"steps.result|{execution_id}|{seq}"


def signal_payload(execution_id: str, channel: str, key: str | None) -> str:
    return f"signals.payload|{execution_id}|{channel}|{key if key is not None else ''}"


def update_input(execution_id: str, update_id: str) -> str:
    return f"updates.input|{execution_id}|{update_id}"


def update_output(execution_id: str, update_id: str) -> str:
    return f"updates.output|{execution_id}|{update_id}"


# --- the process's ring --------------------------------------------------------------------

#: The installed rings, innermost last; rows.py reads it directly (one truthiness check).
RINGS: Final[list[KeyRing]] = []


def ring() -> KeyRing | None:
    """The installed ring (the innermost install), or None: encryption is off."""
    return RINGS[-1] if RINGS else None


def install(keys: KeyRing) -> Callable[[], None]:
    """Seal and open with `keys` in this process until the returned function is called.
    Installs nest (the last one wins until it is removed): one ring per process is the model,
    nesting only serves a test that runs a server and a CLI command side by side."""
    RINGS.append(keys)

    def uninstall() -> None:
        for i in range(len(RINGS) - 1, -1, -1):
            if RINGS[i] is keys:
                del RINGS[i]
                return

    return uninstall

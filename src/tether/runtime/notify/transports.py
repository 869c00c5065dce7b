"""Sending one notification: an HTTP POST (a webhook, Slack) or an email over SMTP, each
bounded by its channel's timeout, and what came of it (`Outcome`).

An outcome says whether another attempt could succeed: a network failure, a timeout, a 5xx, a
408, 425 or 429 could; any other refusal (a 4xx, a redirect: redirects are never followed, a
permanent SMTP error) is a configuration problem that the same request would meet again.
Error text never holds the destination (a URL may hold a token) or the server's reply.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Final

import aiosmtplib
import httpx

from tether.runtime.notify.channels import EmailChannel, Resolved

_RETRYABLE_STATUS: Final = frozenset({408, 425, 429})
#: The longest wait a receiver's Retry-After may ask for that we honour, in seconds.
MAX_RETRY_AFTER_S: Final = 3600.0


@dataclass(frozen=True)
class Outcome:
    """What one attempt came to. `retry`: another attempt could succeed; `after_s`: how long
    the receiver asked us to wait (Retry-After)."""

    delivered: bool
    error: str = ""
    retry: bool = True
    after_s: float | None = None


DELIVERED: Final = Outcome(True)


def _retry_after(value: str | None) -> float | None:
    if value is None or not value.strip().isdigit():
        return None
    return min(float(value.strip()), MAX_RETRY_AFTER_S)


async def post(
    client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str], timeout_s: float
) -> Outcome:
    """POST `body` to `url`; a 2xx is delivered. The response body is never read."""
    try:
        async with asyncio.timeout(timeout_s):
            request = client.build_request("POST", url, content=body, headers=headers)
            response = await client.send(request, stream=True, follow_redirects=False)
            await response.aclose()
    except TimeoutError:
        return Outcome(False, "timed out")
    except httpx.HTTPError as exc:
        return Outcome(False, type(exc).__name__)
    status = response.status_code
    if 200 <= status < 300:
        return DELIVERED
    retry = status >= 500 or status in _RETRYABLE_STATUS
    return Outcome(
        False, f"HTTP {status}", retry, _retry_after(response.headers.get("retry-after"))
    )


async def send_email(resolved: Resolved, message: EmailMessage, recipient: str) -> Outcome:
    """Send `message` to `recipient` over the channel's SMTP server."""
    channel = resolved.channel
    assert isinstance(channel, EmailChannel)  # noqa: S101 — the sender picks by channel type
    password = resolved.secret.reveal() if resolved.secret is not None else None
    try:
        async with asyncio.timeout(channel.timeout_s):
            await aiosmtplib.send(
                message,
                sender=channel.sender,
                recipients=[recipient],
                hostname=channel.host,
                port=channel.port,
                username=channel.username,
                password=password,
                use_tls=channel.tls == "tls",
                start_tls=channel.tls == "starttls",
                timeout=channel.timeout_s,
            )
    except TimeoutError:
        return Outcome(False, "timed out")
    except aiosmtplib.SMTPRecipientsRefused:
        return Outcome(False, "SMTP recipient refused", retry=False)
    except aiosmtplib.SMTPResponseException as exc:
        # 4yz: transient (try again later); 5yz: permanent (RFC 5321 §4.2.1)
        return Outcome(False, f"SMTP {exc.code}", retry=not 500 <= exc.code < 600)
    except (aiosmtplib.SMTPException, OSError) as exc:
        return Outcome(False, type(exc).__name__)
    return DELIVERED

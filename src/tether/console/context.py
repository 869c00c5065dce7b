"""What every console request needs: the console's parts (`Console`), who the visitor is
(`visitor`: the principal from the security layer or from the session cookie, and the
session's CSRF token), and rendering a template into a response that carries the session
cookie and the console's security headers.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlsplit

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from tether.console import session as sessions
from tether.console.session import Session
from tether.principal import Principal
from tether.runtime import audit
from tether.runtime.audit import AuditWriter
from tether.runtime.changes import ChangeHub
from tether.runtime.operations import Operations
from tether.security.limits import StreamSlots
from tether.security.tokens import ANONYMOUS, Authenticator

PREFIX: Final = "/console"
TEMPLATES: Final = Path(__file__).parent / "templates"
STATIC: Final = Path(__file__).parent / "static"
#: The visitor's theme: `light` or `dark` (no cookie: the system's), readable by the page's
#: script, which sets it without a round trip.
THEME_COOKIE: Final = "tether_theme"
THEMES: Final = ("light", "dark")
HEADERS: Final = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["prefix"] = PREFIX
    return env


@dataclass
class Console:
    """The console's parts, built once the runtime is up."""

    ops: Operations  # every tenant's: each request narrows it to its principal's scope
    hub: ChangeHub
    auth: Authenticator
    key: bytes  # session.console_key(server secret)
    principal_key: str  # where the security layer leaves the principal in the ASGI scope
    auditor: AuditWriter | None = None
    env: jinja2.Environment | None = None
    #: open live streams per caller (TETHER_MAX_STREAMS_PER_TOKEN, as for MCP streams)
    slots: StreamSlots = field(default_factory=lambda: StreamSlots(32))
    #: approval links' HMAC key (links.link_key(server secret)); random: links made by
    #: anyone else are refused
    link_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def __post_init__(self) -> None:
        if self.env is None:
            self.env = templates()


@dataclass(frozen=True)
class Visitor:
    principal: Principal | None  # None: tokens are required and nobody has signed in
    session: Session
    fresh: bool  # the session is new: the response sets its cookie
    csrf: str

    @property
    def may_answer(self) -> bool:
        return self.principal is not None and self.principal.may_mutate


def visitor(c: Console, request: Request) -> Visitor:
    """Who is asking: without tokens configured, the security layer's principal (the dev
    admin on loopback, else the anonymous reader); a bearer token the layer accepted; else
    the principal of the signed-in session's token, looked up again now (revoked: signed out)."""
    now = time.time()
    session = sessions.read(c.key, request.cookies.get(sessions.COOKIE), now)
    fresh = session is None
    if session is None:
        session = sessions.issue(c.key, "n", "", now)
    scoped = request.scope.get(c.principal_key)
    principal: Principal | None = None
    if not c.auth.required:
        principal = scoped if isinstance(scoped, Principal) else ANONYMOUS
    elif isinstance(scoped, Principal) and scoped is not ANONYMOUS:
        principal = scoped
    elif session.signed_in:
        principal = c.auth.by_digest(session.subject)
    return Visitor(principal, session, fresh, sessions.csrf_token(c.key, session))


def scoped_ops(c: Console, v: Visitor) -> Operations:
    return c.ops.for_principal(v.principal)


def set_session(response: Response, request: Request, s: Session) -> None:
    response.set_cookie(
        sessions.COOKIE,
        s.value,
        max_age=sessions.SESSION_S,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def finish(response: Response, request: Request, v: Visitor) -> Response:
    response.headers.update(HEADERS)
    if v.fresh:
        set_session(response, request, v.session)
    return response


def theme_of(request: Request) -> str | None:
    """The theme the visitor chose (its cookie), or None: the system's (prefers-color-scheme)."""
    chosen = request.cookies.get(THEME_COOKIE)
    return chosen if chosen in THEMES else None


def here(request: Request) -> str:
    """This page's path and query: where a form on it sends the visitor back to. A page sent
    in answer to a form (POST) has no address to come back to: the page the form was on."""
    if request.method in ("GET", "HEAD"):
        return request.url.path + (f"?{request.url.query}" if request.url.query else "")
    referer = urlsplit(request.headers.get("referer", ""))
    came_from = referer.path + (f"?{referer.query}" if referer.query else "")
    return safe_next(came_from, f"{PREFIX}/runs")


def render(
    c: Console, request: Request, v: Visitor, name: str, code: int = 200, **ctx: Any
) -> Response:
    assert c.env is not None  # noqa: S101 — set in __post_init__
    html = c.env.get_template(name).render(
        visitor=v,
        principal=v.principal,
        csrf=v.csrf,
        path=request.url.path,
        here=here(request),
        theme=theme_of(request),
        **ctx,
    )
    return finish(HTMLResponse(html, status_code=code), request, v)


def redirect(request: Request, v: Visitor, to: str) -> Response:
    return finish(RedirectResponse(to, status_code=303), request, v)


def sign_in_redirect(request: Request, v: Visitor) -> Response:
    nxt = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return redirect(request, v, f"{PREFIX}/sign-in?next={_quote(nxt)}")


def _quote(text: str) -> str:
    return quote(text, safe="/")


def safe_next(value: str | None, default: str) -> str:
    """A redirect target from a form or query: only a path inside the console."""
    if value and value.startswith(PREFIX + "/") and "//" not in value and "\\" not in value:
        return value
    return default


def record(
    c: Console, request: Request, v: Visitor, method: str, outcome: str, run_id: str | None
) -> None:
    """One audit row for a console action (surface `console`), refused ones too."""
    p = v.principal or ANONYMOUS
    audited(c, request, p.name, p.tenant, f"runs/{method}", outcome, run_id)


def audited(
    c: Console,
    request: Request,
    principal: str,
    tenant: str | None,
    method: str,
    outcome: str,
    execution_id: str | None,
) -> None:
    """One audit row of the console (surface `console`, the request's address), when the
    console has an auditor: who did `method` in `tenant`, and how it ended."""
    if c.auditor is None:
        return
    client = request.client
    c.auditor.record(
        audit.entry(
            principal=principal,
            surface="console",
            method=method,
            outcome=outcome,
            tenant=tenant,
            execution_id=execution_id,
            remote=client.host if client else None,
        )
    )

"""Approval links in the browser (`runtime/links.py`): `GET {PATH}/{token}` shows what the link
would do and a form with one confirming button (and the decision's inputs, if it has any);
only that form's `POST` decides. No sign-in: the signed link is the credential, and it names
the person who decides.

- A GET never changes anything (link scanners and chat previews fetch links): it checks the
  link (signature, expiry, use, whether its wait is still open under its key) and shows the
  confirmation page or why the link does not work.
- The form carries a CSRF token bound to the link and to a cookie of this browser
  (`tether_link`, scoped to the links' path): a POST that did not come from the page the GET
  served is refused (403) and changes nothing.
- The POST answers through the one answer path as the link's person, with the link's nonce
  (`once`): marked used in the same transaction, so a second POST says the link was used.
  Refused, stale, expired and used links change nothing; every POST of a genuine link leaves
  an audit row (surface `console`, method `links/<decision>`, principal: the link's person).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from tether.console import forms
from tether.console.context import HEADERS, Console, audited, theme_of
from tether.console.pages import console_of
from tether.runtime import errors, links, votes
from tether.runtime.links import Link
from tether.runtime.rows import ExecutionRow

COOKIE: Final = "tether_link"
_DONE: Final = {
    "approve": "approved",
    "reject": "rejected",
    "push_back": "pushed back",
    "complete": "completed",
}


def form_token(key: bytes, link: Link, browser: str) -> str:
    """The form token of `link`'s page on the browser holding `browser` in its `tether_link`
    cookie (`key`: the links' key)."""
    text = f"link-form.{browser}.{link.token}".encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()[:40]


def _csrf_ok(c: Console, link: Link, browser: str | None, token: str | None) -> bool:
    if not browser or not token:
        return False
    submitted = token.encode("utf-8", "surrogatepass")
    return hmac.compare_digest(submitted, form_token(c.link_key, link, browser).encode())


def _page(
    c: Console, request: Request, code: int, browser: str | None = None, **ctx: Any
) -> Response:
    assert c.env is not None  # noqa: S101 — set in Console.__post_init__
    defaults: dict[str, Any] = {"link": None, "wait": None, "form": None, "problems": []}
    html = c.env.get_template("link.html").render(theme=theme_of(request), **{**defaults, **ctx})
    # The console's `Referrer-Policy: same-origin` keeps the link (in the URL) from other
    # sites; `no-referrer` would make browsers send `Origin: null` with the form's POST, which
    # the Host/Origin policy refuses.
    response = HTMLResponse(html, status_code=code, headers=HEADERS)
    if browser is not None:
        response.set_cookie(
            COOKIE,
            browser,
            max_age=int(links.MAX_TTL_S),
            path=links.PATH,
            httponly=True,
            # Lax: a link opened from a mail or a chat is a cross-site navigation, and two
            # links opened from it in two tabs must share one cookie; the form's token, not
            # the cookie, is what a cross-site POST cannot have.
            samesite="lax",
            secure=request.url.scheme == "https",
        )
    return response


def _refused(c: Console, request: Request, code: int, title: str, why: str) -> Response:
    return _page(c, request, code, state="refused", title=title, why=why)


def _invalid(c: Console, request: Request) -> Response:
    return _refused(
        c,
        request,
        403,
        "This link is not valid",
        "It was not made by this server, or it was changed on the way. Nothing was changed.",
    )


def _expired(c: Console, request: Request) -> Response:
    return _refused(
        c,
        request,
        410,
        "This link has expired",
        "Ask for a new link, or decide in the console. Nothing was changed.",
    )


def _used(c: Console, request: Request) -> Response:
    return _refused(
        c, request, 409, "This link has been used", "It acts only once. Nothing was changed."
    )


def _stale(c: Console, request: Request, run: ExecutionRow | None) -> Response:
    why = "The request it answers is no longer open: it was decided, or its run moved on"
    if run is not None and not run.live:
        why += f" (the run has ended: {run.status.replace('_', ' ')})"
    return _refused(c, request, 409, "This request has moved on", why + ". Nothing was changed.")


def _form(wait: dict[str, Any], decision: str) -> forms.WaitForm:
    """The wait's form narrowed to the link's decision: an approve's or completion's inputs,
    a rejection's reason, a push-back's feedback (an approval's inputs)."""
    form = forms.wait_form(wait)
    if decision == "reject" and form.kind == "approval":
        return _only(form, fields=(), reason=True)
    if decision == "push_back" and form.feedback is not None:
        return _only(form, fields=form.feedback, reason=False)
    if form.kind == "approval" and wait.get("choices"):
        return _only(form, fields=(), reason=False)
    return _only(form, fields=form.fields, reason=False)


def _only(form: forms.WaitForm, *, fields: tuple[forms.Field, ...], reason: bool) -> forms.WaitForm:
    return forms.WaitForm(
        form.key,
        form.kind,
        form.name,
        form.prompt,
        form.decisions,
        fields,
        form.feedback,
        reason=reason,
        payload=False,
        wait=form.wait,
    )


async def _open(
    c: Console, request: Request
) -> tuple[Link | None, ExecutionRow | None, dict[str, Any] | None, Response | None]:
    """The link, its run and its open wait; or the response saying why it does not work."""
    link = links.read(c.link_key, request.path_params["token"])
    if link is None:
        return None, None, None, _invalid(c, request)
    if link.expired(time.time()):
        return link, None, None, _expired(c, request)
    if await c.ops.link_used(link.nonce):
        return link, None, None, _used(c, request)
    try:
        run = (await c.ops.get(link.execution_id, follow_chain=False)).requested
    except errors.ExecutionNotFound:
        return link, None, None, _stale(c, request, None)
    wait = next((w for w in run.waits if w.get("key") == link.key), None)
    if wait is None or link.decision not in links.decisions(wait):
        return link, run, None, _stale(c, request, run)
    return link, run, wait, None


def _confirm(
    c: Console,
    request: Request,
    link: Link,
    run: ExecutionRow,
    wait: dict[str, Any],
    code: int = 200,
    problems: list[str] | None = None,
    values: dict[str, str] | None = None,
) -> Response:
    browser = request.cookies.get(COOKIE) or secrets.token_hex(16)
    return _page(
        c,
        request,
        code,
        browser,
        state="confirm",
        title=f"{_label(link.decision)}: {wait.get('name')}",
        link=link,
        run=run,
        wait=wait,
        form=_form(wait, link.decision),
        votes=votes.summary(wait),
        csrf=form_token(c.link_key, link, browser),
        label=_label(link.decision),
        problems=problems or [],
        values=values or {},
        action=f"{links.PATH}/{link.token}",
    )


def _label(decision: str) -> str:
    return forms.DECISION_LABELS.get(decision, decision)


async def confirm_page(request: Request) -> Response:
    """GET: the confirmation page, or why the link does not work. Changes nothing."""
    c = console_of(request)
    link, run, wait, refused = await _open(c, request)
    if refused is not None:
        return refused
    assert link is not None and run is not None and wait is not None  # noqa: S101 — _open
    return _confirm(c, request, link, run, wait)


def _record(
    c: Console, request: Request, link: Link, outcome: str, run: ExecutionRow | None
) -> None:
    """The audit row of a POST of a genuine link: its person, its decision, the outcome."""
    tenant = run.tenant if run is not None else None
    method = f"links/{link.decision}"
    audited(c, request, link.approver, tenant, method, outcome, link.execution_id)


async def decide(request: Request) -> Response:
    """POST: decide as the link's person, once."""
    c = console_of(request)
    data = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    link = links.read(c.link_key, request.path_params["token"])
    if link is None:
        return _invalid(c, request)  # no verified identity: not audited (docs/security.md)
    if not _csrf_ok(c, link, request.cookies.get(COOKIE), data.get("csrf")):
        _record(c, request, link, "refused", None)
        return _refused(
            c,
            request,
            403,
            "Confirm from the link's page",
            "This form did not come from the link's own page. Open the link again and use "
            "its button. Nothing was changed.",
        )
    link, run, wait, refused = await _open(c, request)
    if refused is not None or link is None or run is None or wait is None:
        if link is not None:
            _record(c, request, link, "refused", run)
        return refused or _invalid(c, request)
    form = _form(wait, link.decision)
    try:
        response = forms.response(form, {**data, "decision": link.decision})
        result = await c.ops.answer(run.id, link.key, response, by=link.approver, once=link.nonce)
    except errors.LinkUsed:
        _record(c, request, link, "refused", run)
        return _used(c, request)
    except errors.VoteRefused as exc:
        _record(c, request, link, "refused", run)
        why = "; ".join(exc.errors) or exc.message
        return _refused(c, request, 403, "You may not decide this", why + ". Nothing was changed.")
    except errors.AnswerRejected as exc:
        _record(c, request, link, "error", run)
        problems = list(exc.errors or [exc.message])
        return _confirm(c, request, link, run, wait, 422, problems, data)
    except (errors.WaitNotOpen, errors.AnswerConflict, errors.ExecutionNotFound):
        _record(c, request, link, "refused", run)
        return _stale(c, request, run)
    _record(c, request, link, "ok", run)
    after = (await c.ops.get(run.id, follow_chain=False)).requested
    now_open = next((w for w in after.waits if w.get("key") == link.key), None)
    return _page(
        c,
        request,
        200,
        state="done",
        title=f"{_label(link.decision)}: {wait.get('name')}",
        link=link,
        wait=wait,
        duplicate=result.status == "duplicate",
        done=_DONE.get(link.decision, link.decision),
        votes=votes.summary(now_open) if now_open is not None else None,
        still_open=now_open is not None,
    )

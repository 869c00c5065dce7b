"""The console's forms (POST): sign in and out, answer a wait, cancel and retry a run.

Every POST carries the session's CSRF token (refused 403 without it, changing nothing).
Answers go through the one answer path (`answer_wait` with the form's wait key): a key that
is no longer open makes a stale form, which says so, shows the waits open now and changes
nothing. A reader is refused (403) and the refusal is audited, as every action is.
"""

from __future__ import annotations

import time
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from tether.console import forms, session
from tether.console.context import (
    PREFIX,
    THEME_COOKIE,
    THEMES,
    Console,
    Visitor,
    finish,
    record,
    redirect,
    render,
    safe_next,
    scoped_ops,
    set_session,
    sign_in_redirect,
    visitor,
)
from tether.console.pages import (
    console_of,
    inbox_context,
    me,
    not_found,
    page_extras,
    run_context,
)
from tether.runtime import errors
from tether.security.tokens import hash_token

#: A chosen theme is remembered this long.
THEME_S: Final = 365 * 24 * 3600


async def _form(request: Request) -> dict[str, str]:
    data = await request.form()
    return {k: v for k, v in data.items() if isinstance(v, str)}


def _csrf_refused(c: Console, request: Request, v: Visitor) -> Response:
    return render(
        c,
        request,
        v,
        "refused.html",
        403,
        why="This form has expired or did not come from this console. "
        "Reload the page and try again.",
    )


async def sign_in(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    data = await _form(request)
    if not session.csrf_ok(c.key, v.session, data.get("csrf")):
        return _csrf_refused(c, request, v)
    token = data.get("token", "").strip()
    nxt = safe_next(data.get("next"), f"{PREFIX}/runs")
    principal = c.auth.by_digest(hash_token(token)) if token else None
    if principal is None:
        return render(
            c,
            request,
            v,
            "sign_in.html",
            401,
            next=nxt,
            required=c.auth.required,
            error="That token is unknown, expired or revoked.",
        )
    signed = session.issue(c.key, "t", hash_token(token), time.time())
    response = redirect(request, v, nxt)
    set_session(response, request, signed)
    return response


async def sign_out(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    data = await _form(request)
    if not session.csrf_ok(c.key, v.session, data.get("csrf")):
        return _csrf_refused(c, request, v)
    response = redirect(request, v, f"{PREFIX}/sign-in")
    set_session(response, request, session.issue(c.key, "n", "", time.time()))
    return response


async def theme(request: Request) -> Response:
    """POST /theme: remember the visitor's theme (`system` forgets it) and go back; the page's
    script does the same without a round trip."""
    c = console_of(request)
    v = visitor(c, request)
    data = await _form(request)
    if not session.csrf_ok(c.key, v.session, data.get("csrf")):
        return _csrf_refused(c, request, v)
    chosen = data.get("theme", "")
    if chosen not in (*THEMES, "system"):
        return render(c, request, v, "refused.html", 400, why=f"There is no theme {chosen!r}.")
    response = redirect(request, v, safe_next(data.get("next"), f"{PREFIX}/runs"))
    if chosen == "system":
        response.delete_cookie(THEME_COOKIE, path=PREFIX)
    else:
        secure = request.url.scheme == "https"
        response.set_cookie(
            THEME_COOKIE, chosen, max_age=THEME_S, path=PREFIX, samesite="strict", secure=secure
        )
    return response


async def _guard(
    c: Console, request: Request, v: Visitor, method: str, run_id: str
) -> tuple[dict[str, str], Response | None]:
    """The form data, or the response refusing it: not signed in, bad CSRF, or a reader."""
    if v.principal is None:
        return {}, sign_in_redirect(request, v)
    data = await _form(request)
    if not session.csrf_ok(c.key, v.session, data.get("csrf")):
        record(c, request, v, method, "refused", run_id)
        return data, _csrf_refused(c, request, v)
    if not v.may_answer:
        record(c, request, v, method, "refused", run_id)
        why = f"{v.principal.name} ({v.principal.role}) may read runs but not act on them."
        return data, render(c, request, v, "refused.html", 403, why=why)
    return data, None


async def _run_page(
    c: Console, request: Request, v: Visitor, run_id: str, code: int, **extra: Any
) -> Response:
    ops = scoped_ops(c, v)
    ctx = await run_context(ops, run_id)
    defaults: dict[str, Any] = {"values": {}, "problems": {}, "stale": None, "notice": None}
    more = await page_extras(ops, ctx["row"], me(v))
    return render(c, request, v, "run.html", code, **ctx, **more, **{**defaults, **extra})


async def answer(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    run_id = request.path_params["run_id"]
    data, refused = await _guard(c, request, v, "answer", run_id)
    if refused is not None:
        return refused
    assert v.principal is not None  # noqa: S101 — _guard refuses otherwise
    ops = scoped_ops(c, v)
    key = data.get("key", "")
    try:
        current = (await ops.get(run_id)).current
        wait = next((w for w in current.waits if w.get("key") == key), None)
        if wait is None:
            raise errors.WaitNotOpen(f"wait {key!r} is not open")
        result = await ops.answer_wait(
            current.id, key, forms.response(forms.wait_form(wait), data), by=v.principal.name
        )
    except errors.ExecutionNotFound:
        record(c, request, v, "answer", "refused", run_id)
        return not_found(c, request, v, f"run {run_id}")
    except errors.AnswerRejected as exc:
        record(c, request, v, "answer", "error", run_id)
        problems = {key: list(getattr(exc, "errors", None) or [exc.message])}
        values = {key: data}
        return await _answer_again(c, request, v, run_id, data, problems=problems, values=values)
    except (errors.WaitNotOpen, errors.AnswerConflict):
        record(c, request, v, "answer", "refused", run_id)
        return await _answer_again(c, request, v, run_id, data, stale=key)
    record(c, request, v, "answer", "ok", run_id)
    nxt = safe_next(data.get("next"), f"{PREFIX}/runs/{run_id}")
    done = "answered" if result.status == "accepted" else "duplicate"
    return redirect(request, v, f"{nxt}{'&' if '?' in nxt else '?'}done={done}")


async def _answer_again(
    c: Console, request: Request, v: Visitor, run_id: str, data: dict[str, str], **extra: Any
) -> Response:
    """The page the form came from again (the inbox or the run), with what went wrong."""
    code = 409 if extra.get("stale") else 422
    if data.get("next", "").startswith(f"{PREFIX}/inbox"):
        ctx = await inbox_context(scoped_ops(c, v), me(v))
        base: dict[str, Any] = {"values": {}, "problems": {}, "stale": None}
        return render(c, request, v, "inbox.html", code, **ctx, **{**base, **extra})
    return await _run_page(c, request, v, run_id, code, **extra)


async def confirm(request: Request) -> Response:
    """GET /runs/{id}/cancel|retry: the confirmation step."""
    c = console_of(request)
    v = visitor(c, request)
    run_id, action = request.path_params["run_id"], request.path_params["action"]
    if v.principal is None:
        return sign_in_redirect(request, v)
    try:
        row = (await scoped_ops(c, v).get(run_id)).current
    except errors.ExecutionNotFound:
        return not_found(c, request, v, f"run {run_id}")
    if not v.may_answer:
        return render(
            c,
            request,
            v,
            "refused.html",
            403,
            why=f"{v.principal.name} ({v.principal.role}) may not {action} runs.",
        )
    return render(c, request, v, "confirm.html", row=row, action=action)


async def steer(request: Request) -> Response:
    """POST /runs/{id}/cancel|retry, confirmed."""
    c = console_of(request)
    v = visitor(c, request)
    run_id, action = request.path_params["run_id"], request.path_params["action"]
    data, refused = await _guard(c, request, v, action, run_id)
    if refused is not None:
        return refused
    assert v.principal is not None  # noqa: S101 — _guard refuses otherwise
    ops = scoped_ops(c, v)
    try:
        if action == "cancel":
            row = await ops.cancel(run_id, reason=data.get("reason") or None, by=v.principal.name)
        else:
            # the retry button: the run again from the start, under a new business id
            row = await ops.again(run_id, by=v.principal.name)
    except errors.ExecutionNotFound:
        record(c, request, v, action, "refused", run_id)
        return not_found(c, request, v, f"run {run_id}")
    except errors.TetherError as exc:
        record(c, request, v, action, "error", run_id)
        return await _run_page(c, request, v, run_id, 409, notice=exc.message)
    record(c, request, v, action, "ok", row.id)
    return finish(redirect(request, v, f"{PREFIX}/runs/{row.id}?done={action}"), request, v)

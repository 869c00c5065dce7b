"""Bad documents for the fuzz phase beyond the protocol envelope: inline DAG specs (the
`dagu_execute` tool's `spec`), `create_workflow` plans, and the console's forms.

Every document carries at least one defect the server must refuse before it changes anything
(a `certain` defect), plus noise that may or may not be refused on its own but never repairs
the certain one. What counts as refused: a tool error or a Realm `provide_input` reply, a 4xx,
a refusal for size or depth (a limit on documents is as good an answer as any other refusal);
never a 5xx and never a changed row.

The inline DAG specs rely on the cluster leaving TETHER_INLINE_SHELL off: a spec whose only
defect the generator did not make (a `command` step) is still refused, by that policy.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Text a fuzzer sends where the server expects a name, a value or a document: empty and
#: blank, NUL, a byte-order mark and a direction override, a mis-decoded and a long emoji,
#: oversized text, paths, SQL, format strings, shell and template syntax, an execution id.
WEIRD_TEXT = (
    "",
    " ",
    "\u0000",
    "a\u0000b",
    "\ufeff",
    "\u202e",
    "😀" * 30,
    "x" * 5000,
    "../../etc/passwd",
    "'; DROP TABLE executions; --",
    "%s%n",
    "${HOME}",
    "$(id)",
    "`id`",
    "null",
    "\\",
    '"',
    "\r\n",
    "{{ steps }}",
    "ð\x9f\x98\x80",
    "%s%s%n",
    "ex_" + "A" * 40,
)
#: JSON values of every type where the server expects something else, out-of-range and deep
#: ones among them, then the weird text.
WEIRD_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**63,
    -(2**63) - 1,
    1.5,
    1e308,
    [],
    {},
    [1, "a"],
    {"a": {"b": {"c": []}}},
    *WEIRD_TEXT,
)

# --- inline DAG specs ---------------------------------------------------------------------

BASE_DAG = [
    "name: {name}",
    "params: WHO=world",
    "steps:",
    "  - name: first",
    '    command: "echo hello ${{WHO}}"',
    "  - name: second",
    "    command: echo two",
    "    depends: first",
]


def _deep(kind: str, depth: int) -> str:
    return "[" * depth + "]" * depth if kind == "flow" else "{a: " * depth + "}" * depth


def _alias_bomb(levels: int, fan: int) -> str:
    lines = ["bomb:", '  l0: &l0 ["x"]']
    for i in range(1, levels):
        refs = ", ".join(f"*l{i - 1}" for _ in range(fan))
        lines.append(f"  l{i}: &l{i} [{refs}]")
    return "\n".join(lines)


@dataclass
class DagDoc:
    lines: list[str]
    head: list[str] = field(default_factory=list)  # replaces the whole text when set


class DagGenerator:
    """`dagu_execute` arguments for an inline spec, each with a certain defect."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, seq: Any) -> Any:
        return self.rng.choice(seq)

    def arguments(self) -> dict[str, Any]:
        name = self.pick(("fuzzdag", "fuzz-dag-2", "x"))
        doc = DagDoc([line.format(name=name) for line in BASE_DAG])
        args: dict[str, Any] = {"action": self.pick(("start", "enqueue")), "name": name}
        if self.rng.random() < 0.5:
            args["targetType"] = "inline_spec"
        if self.rng.random() < 0.15:
            self.pick(self.INPUT_DEFECTS)(self, args)
        else:
            self.pick(self.SPEC_DEFECTS)(self, doc)
        for _ in range(self.rng.randint(0, 2)):
            self.pick(self.NOISE)(self, doc, args)
        if "spec" not in args:
            args["spec"] = "\n".join(doc.head or doc.lines) + "\n"
        return args

    # certain defects in the spec text
    def s_unknown_top(self, doc: DagDoc) -> None:
        doc.lines.insert(
            self.rng.randrange(len(doc.lines)), f"{self.pick(('bogus', 'timeoutSec', 'run'))}: 1"
        )

    def s_unknown_step_field(self, doc: DagDoc) -> None:
        doc.lines.insert(5, f"    {self.pick(('signalOnStop', 'executor', 'foo'))}: x")

    def s_no_steps(self, doc: DagDoc) -> None:
        doc.lines = [*doc.lines[:2], self.pick(("steps: []", "steps: {}", "steps: 3", "steps:"))]

    def s_bad_depends(self, doc: DagDoc) -> None:
        doc.lines[-1] = self.pick(
            ("    depends: nowhere", "    depends: second", "    depends: [first, first, 9]")
        )

    def s_cycle(self, doc: DagDoc) -> None:
        doc.lines.insert(5, "    depends: second")

    def s_duplicate(self, doc: DagDoc) -> None:
        doc.lines[5] = "  - name: first"

    def s_bad_name(self, doc: DagDoc) -> None:
        bad = self.pick(("'a b'", "'../x'", "'" + "n" * 300 + "'", "[1]", "{}", "''"))
        doc.lines[0] = f"name: {bad}"

    def s_bad_yaml(self, doc: DagDoc) -> None:
        at = self.rng.randrange(len(doc.lines))
        broken = self.pick(("steps: [", "\tname: tab", "a: b: c", "- : :", "'unclosed", "{x: [}"))
        doc.lines.insert(at, broken)

    def s_not_a_mapping(self, doc: DagDoc) -> None:
        doc.head = [self.pick(("- a\n- b", "just text", "123", "~", "", "[]", "!!binary aGk="))]

    def s_deep(self, doc: DagDoc) -> None:
        depth = self.pick((50, 500, 3000))
        doc.lines.insert(1, f"bogus: {_deep(self.pick(('flow', 'map')), depth)}")

    def s_alias_bomb(self, doc: DagDoc) -> None:
        doc.lines.insert(1, _alias_bomb(self.pick((4, 7)), self.pick((4, 8))))

    def s_large(self, doc: DagDoc) -> None:
        count = self.pick((100, 400))
        for i in range(count):
            doc.lines += [f"  - name: s{i}", f"    command: echo {i}", "    depends: first"]
        doc.lines.append("  - name: last\n    nope: 1")

    # certain defects in the arguments around the spec
    def i_spec_type(self, args: dict[str, Any]) -> None:
        args["spec"] = self.pick((1, [], {}, True, {"steps": []}))

    def i_unknown_argument(self, args: dict[str, Any]) -> None:
        args[self.pick(("specs", "dag", "\u0000", "yaml"))] = "x"

    def i_target_dag(self, args: dict[str, Any]) -> None:
        args["targetType"] = self.pick(("dag", "run", "inline", 1))

    def i_action(self, args: dict[str, Any]) -> None:
        args["action"] = self.pick(("stop", "START", "", None, "retry", 1))

    def i_wait(self, args: dict[str, Any]) -> None:
        args["waitTimeoutSeconds"] = self.pick((0, 301, 5, "5", -1))
        if self.rng.random() < 0.5:
            args["wait"] = "yes"

    def i_run_id(self, args: dict[str, Any]) -> None:
        args["dagRunId"] = self.pick(("a b", "../x", "x" * 65, "\u0000", "é"))

    # noise
    def n_params(self, doc: DagDoc, args: dict[str, Any]) -> None:
        args["params"] = self.pick((*WEIRD_TEXT[:8], {"WHO": "x"}, {"": None}, "A=1 B=2"))

    def n_labels(self, doc: DagDoc, args: dict[str, Any]) -> None:
        args["labels"] = self.pick((["team=x"], ["=", "a"], ["x" * 300], []))

    def n_value(self, doc: DagDoc, args: dict[str, Any]) -> None:
        at = self.rng.randrange(len(doc.lines))
        value = ": " + json.dumps(self.pick(WEIRD_TEXT))
        doc.lines[at] = re.sub(r": .*$", lambda _: value, doc.lines[at])

    def n_wait(self, doc: DagDoc, args: dict[str, Any]) -> None:
        args["wait"] = True
        args["waitTimeoutSeconds"] = 1

    def n_profile(self, doc: DagDoc, args: dict[str, Any]) -> None:
        args["profile"] = self.pick(("nope", "", "\u0000"))

    SPEC_DEFECTS: tuple[Callable[..., None], ...] = (
        s_unknown_top,
        s_unknown_step_field,
        s_no_steps,
        s_bad_depends,
        s_cycle,
        s_duplicate,
        s_bad_name,
        s_bad_yaml,
        s_not_a_mapping,
        s_deep,
        s_alias_bomb,
        s_large,
    )
    INPUT_DEFECTS: tuple[Callable[..., None], ...] = (
        i_spec_type,
        i_unknown_argument,
        i_target_dag,
        i_action,
        i_wait,
        i_run_id,
    )
    NOISE: tuple[Callable[..., None], ...] = (n_params, n_labels, n_value, n_wait, n_profile)


# --- create_workflow plans ------------------------------------------------------------------


def _deep_json(depth: int) -> Any:
    out: Any = "x"
    for _ in range(depth):
        out = {"a": [out]}
    return out


class PlanGenerator:
    """`create_workflow` arguments, each with a certain defect in its plan."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, seq: Any) -> Any:
        return self.rng.choice(seq)

    def arguments(self) -> dict[str, Any]:
        steps: list[Any] = [
            {"id": "gather", "description": "Gather the facts"},
            {"id": "write", "description": "Write it up", "depends_on": ["gather"]},
        ]
        args: dict[str, Any] = {
            "steps": steps,
            "metadata": {"name": self.pick(("fuzzplan", "fuzz-plan")), "description": "d"},
        }
        self.pick(self.CERTAIN)(self, args, steps)
        for _ in range(self.rng.randint(0, 2)):
            self.pick(self.NOISE)(self, args, steps)
        return args

    def c_steps(self, args: dict[str, Any], steps: list[Any]) -> None:
        if self.rng.random() < 0.3:
            del args["steps"]
        else:
            args["steps"] = self.pick(([], {}, "gather", 0, None, [[]]))

    def c_step_shape(self, args: dict[str, Any], steps: list[Any]) -> None:
        steps.insert(self.rng.randrange(3), self.pick(WEIRD_VALUES))
        if steps[0] is None or isinstance(steps[0], dict):
            steps[0] = "not a step"

    def c_step_id(self, args: dict[str, Any], steps: list[Any]) -> None:
        choice = self.rng.randrange(3)
        if choice == 0:
            del steps[0]["id"]
        elif choice == 1:
            steps[0]["id"] = self.pick(("", " ", "a b", "../x", 1, None, "x" * 300, "\u0000"))
        else:
            steps[1]["id"] = "gather"  # a duplicate

    def c_depends(self, args: dict[str, Any], steps: list[Any]) -> None:
        steps[1]["depends_on"] = self.pick(
            (["nowhere"], ["write"], ["gather", "gather"], "gather", [1], {})
        )
        if self.rng.random() < 0.3:
            steps[0]["depends_on"] = ["write"]  # forward reference

    def c_schema(self, args: dict[str, Any], steps: list[Any]) -> None:
        steps[0]["input_schema"] = self.pick(
            ({"type": 5}, {"type": "nope"}, {"required": "x"}, {"properties": []}, {"minimum": "a"})
        )

    def c_step_fields(self, args: dict[str, Any], steps: list[Any]) -> None:
        if self.rng.random() < 0.5:
            steps[1]["structured_output"] = self.pick(("loose", True, 1, "STRICT"))
        else:
            steps[1]["llm_timeout_seconds"] = self.pick((0, -5, "10", True, 1.5))

    def c_description(self, args: dict[str, Any], steps: list[Any]) -> None:
        steps[0]["description"] = self.pick(("", "   ", None, 1, [], {}))

    def c_metadata(self, args: dict[str, Any], steps: list[Any]) -> None:
        choice = self.rng.randrange(3)
        if choice == 0:
            args["metadata"] = self.pick(("x", 1, [], True))
        elif choice == 1:
            args["metadata"]["name"] = self.pick(("a/b", "/", "../../x"))
        else:
            args["metadata"][self.pick(("description", "model", "agent"))] = self.pick((1, [], {}))

    def c_extensions(self, args: dict[str, Any], steps: list[Any]) -> None:
        args["extensions"] = self.pick(({}, {"x": 1}, None, []))

    def c_large(self, args: dict[str, Any], steps: list[Any]) -> None:
        count = self.pick((300, 1000))
        steps += [{"id": f"s{i}", "description": "d" * 50} for i in range(count)]
        steps.append({"id": "s0", "description": "again"})  # a duplicate at the very end

    def c_deep(self, args: dict[str, Any], steps: list[Any]) -> None:
        steps[0]["input_schema"] = {
            "type": "object",
            "properties": _deep_json(self.pick((30, 400))),
        }

    # noise: reported as diagnostics, or refused on its own
    def n_unknown_keys(self, args: dict[str, Any], steps: list[Any]) -> None:
        args[self.pick(("workflow_id", "name", "x", "\u0000"))] = self.pick(WEIRD_VALUES)

    def n_step_keys(self, args: dict[str, Any], steps: list[Any]) -> None:
        if steps and isinstance(steps[-1], dict):
            steps[-1][self.pick(("timeout_seconds", "execution", "x"))] = self.pick(WEIRD_VALUES)

    def n_params(self, args: dict[str, Any], steps: list[Any]) -> None:
        args["params"] = self.pick(({"a": 1}, [], "x", None, _deep_json(50)))

    def n_text(self, args: dict[str, Any], steps: list[Any]) -> None:
        if steps and isinstance(steps[-1], dict):
            steps[-1]["description"] = self.pick(WEIRD_TEXT[2:])

    CERTAIN: tuple[Callable[..., None], ...] = (
        c_steps,
        c_step_shape,
        c_step_id,
        c_depends,
        c_schema,
        c_step_fields,
        c_description,
        c_metadata,
        c_extensions,
        c_large,
        c_deep,
    )
    NOISE: tuple[Callable[..., None], ...] = (n_unknown_keys, n_step_keys, n_params, n_text)


# --- console forms --------------------------------------------------------------------------

FORM = "application/x-www-form-urlencoded"


@dataclass
class Form:
    """One console POST: path under the console, fields (or a raw body), headers."""

    path: str
    fields: list[tuple[str, str]]
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # sent instead of the encoded fields
    chunked: bool = False  # sent without a Content-Length
    oversized: bool = False  # larger than the server's body cap: 413 expected
    cookie: bool = True  # send the session's cookie


@dataclass(frozen=True)
class Session:
    """A console session (its cookie) and the CSRF token that goes with it."""

    cookie: str
    csrf: str


class FormGenerator:
    """Console form posts, each with a certain defect: a missing, wrong or foreign CSRF token
    (or no session to match it), a run that does not exist, a wait key that is not open, an
    action that is not one, a body over the cap, or a body that is not a form."""

    def __init__(
        self,
        rng: random.Random,
        session: Session,
        run_ids: tuple[str, ...],
        cap: int,
        open_keys: tuple[str, ...],
    ) -> None:
        self.rng = rng
        self.session = session
        self.run_ids = run_ids
        self.cap = cap
        self.open_keys = open_keys

    def pick(self, seq: Any) -> Any:
        return self.rng.choice(seq)

    def text(self) -> str:
        return str(self.pick((*WEIRD_TEXT, "approve", "t")))

    def form(self) -> Form:
        kind = self.pick(("sign-in", "sign-out", "answer", "answer", "steer", "steer"))
        run_id = self.pick(self.run_ids)
        fields: list[tuple[str, str]] = [("csrf", self.session.csrf)]
        if kind == "sign-in":
            form = Form("/sign-in", [*fields, ("token", self.text()), ("next", self.next())])
        elif kind == "sign-out":
            form = Form("/sign-out", fields)
        elif kind == "answer":
            key = self.pick(("k", "", "\u0000", "wait-1", *(k + "0" for k in self.open_keys)))
            fields += [("key", key if key not in self.open_keys else "k")]
            fields += [("decision", self.text()), ("f.ticket", self.text())]
            fields += [("next", self.next())]
            form = Form(f"/runs/{run_id}/answer", fields)
        else:
            action = self.pick(("cancel", "retry"))
            form = Form(f"/runs/{run_id}/{action}", [*fields, ("reason", self.text())])
        form.headers["content-type"] = FORM
        # Sign-in with an unknown token, sign-out, and an answer to a key that is not open
        # change nothing even with a good CSRF token; cancel and retry always get a defect.
        if kind == "steer" or self.rng.random() < 0.6:
            self.pick(self.CERTAIN)(self, form)
        for _ in range(self.rng.randint(0, 2)):
            self.pick(self.NOISE)(self, form)
        if form.cookie:
            form.headers["cookie"] = self.session.cookie
        return form

    def next(self) -> str:
        return str(self.pick(("/console/runs", "//evil.example", "javascript:alert(1)", "\r\nx")))

    def c_csrf(self, form: Form) -> None:
        choice = self.rng.randrange(4)
        if choice == 0:
            form.fields = [(k, v) for k, v in form.fields if k != "csrf"]
        elif choice == 1:
            form.fields[0] = ("csrf", self.pick(("0" * 40, "", "x", self.session.csrf + "0")))
        elif choice == 2:
            form.cookie = False  # a CSRF token without the session it belongs to
        else:
            form.fields[0] = ("csrf", self.session.csrf[::-1])

    def c_run(self, form: Form) -> None:
        if form.path.startswith("/runs/"):
            rest = form.path.split("/", 3)[3]
            bad = self.pick(("ex_nope", "%00", "..", "x" * 300, "é"))
            form.path = f"/runs/{bad}/{rest}"
        else:
            self.c_csrf(form)

    def c_action(self, form: Form) -> None:
        if form.path.startswith("/runs/"):
            head = form.path.rsplit("/", 1)[0]
            form.path = f"{head}/{self.pick(('terminate', 'CANCEL', 'retry2', ''))}"
        else:
            self.c_csrf(form)

    def c_oversized(self, form: Form) -> None:
        form.oversized = True
        form.chunked = self.rng.random() < 0.5
        filler = self.cap + self.pick((1, 1000))
        form.raw = _encode(form.fields) + b"&pad=" + b"x" * filler

    def c_not_a_form(self, form: Form) -> None:
        form.raw = self.pick(
            (
                b"\xff\xfe\x00garbage",
                b"csrf=%zz%",
                b"--boundary\r\nContent-Disposition: form-data\r\n",
                b"&" * 10_000,
                json.dumps(dict(form.fields)).encode(),
            )
        )
        if self.rng.random() < 0.5:
            form.headers["content-type"] = self.pick(
                ("multipart/form-data; boundary=boundary", "multipart/form-data", "text/plain")
            )
        # the CSRF token cannot be read from these, unless the JSON is read as a form: it is not
        form.fields = []

    # noise
    def n_many_fields(self, form: Form) -> None:
        form.fields += [(f"f{i}", "v") for i in range(self.pick((100, 5000)))]

    def n_weird_field(self, form: Form) -> None:
        form.fields.append((self.pick(("\u0000", "", "csrf", "f.")), self.text()))

    def n_content_type(self, form: Form) -> None:
        form.headers["content-type"] = self.pick(
            (FORM + "; charset=latin-1", "application/json", "", FORM + "; boundary=x")
        )

    def n_chunked(self, form: Form) -> None:
        form.chunked = True

    CERTAIN: tuple[Callable[..., None], ...] = (
        c_csrf,
        c_csrf,
        c_run,
        c_action,
        c_oversized,
        c_not_a_form,
    )
    NOISE: tuple[Callable[..., None], ...] = (
        n_many_fields,
        n_weird_field,
        n_content_type,
        n_chunked,
    )

    def body(self, form: Form) -> bytes:
        return form.raw if form.raw is not None else _encode(form.fields)


def _encode(fields: list[tuple[str, str]]) -> bytes:
    from urllib.parse import urlencode

    return urlencode(fields).encode()


_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str | None:
    """The CSRF token a console page carries in its forms."""
    found = _CSRF.search(html)
    return found.group(1) if found else None

"""The console: web pages where people see runs and answer what they wait for.

A surface like `mcp` and `tools`: it reaches the runtime through `Operations` (scoped to the
visitor's tenant) and the change hub, and knows nothing of JSON-RPC. Server-rendered HTML
(Jinja2 templates), one stylesheet, a small script for the live parts; everything but the
live updates works without JavaScript.

| module | what |
|---|---|
| `session` | the signed session cookie and CSRF tokens (pure) |
| `forms` | answer forms from a wait's descriptor, and form data back to an answer (pure) |
| `graph` | the layout of a DAG drawing (pure) |
| `views` | what the pages show of a run: statuses (a timeline entry's too), steps (pure) |
| `context` | the console's parts, the visitor, rendering |
| `pages` | GET pages; `actions`: POST forms; `live`: the SSE streams |
| `routes` | the routes under /console |
"""

from __future__ import annotations

from tether.console.context import PREFIX, Console
from tether.console.routes import console_route, running_console

__all__ = ["PREFIX", "Console", "console_route", "running_console"]

"""Declarative workflows parsed and validated into plain, frozen data the runtime interprets.

`specs.dag` holds DAG specs (a strict subset of Dagu's YAML). This package owns parsing and
validation only; it runs nothing and imports no other tether package (the runtime imports it).
"""

from __future__ import annotations

"""The layout of a DAG drawing (PURE): each step a box in the column of its depth (the longest
path of `depends` leading to it), rows in the DAG's order; each dependency an edge from the
right side of one box to the left side of the next. The template draws it as SVG, each box
coloured by status and also labelled with it (a symbol and a word: never colour alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

BOX_W: Final = 180
BOX_H: Final = 48
GAP_X: Final = 60
GAP_Y: Final = 24
MARGIN: Final = 12


@dataclass(frozen=True)
class Node:
    name: str
    status: str
    x: int
    y: int


@dataclass(frozen=True)
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True)
class Layout:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    width: int
    height: int
    box_w: int = BOX_W
    box_h: int = BOX_H


def _depths(order: Sequence[str], depends: Mapping[str, Sequence[str]]) -> dict[str, int]:
    depth: dict[str, int] = {}
    for name in order:  # topological: every dependency comes first
        deps = [depth[d] for d in depends.get(name, ()) if d in depth]
        depth[name] = 1 + max(deps) if deps else 0
    return depth


def layout(
    order: Sequence[str], depends: Mapping[str, Sequence[str]], statuses: Mapping[str, str]
) -> Layout:
    """Boxes and edges for steps in topological `order`; `statuses`: step name → label."""
    depth = _depths(order, depends)
    rows: dict[int, int] = {}
    at: dict[str, tuple[int, int]] = {}
    nodes = []
    for name in order:
        col = depth[name]
        row = rows.get(col, 0)
        rows[col] = row + 1
        x = MARGIN + col * (BOX_W + GAP_X)
        y = MARGIN + row * (BOX_H + GAP_Y)
        at[name] = (x, y)
        nodes.append(Node(name, statuses.get(name, "not_started"), x, y))
    edges = []
    for name in order:
        x2, y2 = at[name]
        for dep in depends.get(name, ()):
            if dep in at:
                x1, y1 = at[dep]
                edges.append(Edge(x1 + BOX_W, y1 + BOX_H // 2, x2, y2 + BOX_H // 2))
    cols = max(depth.values(), default=0) + 1
    height_rows = max(rows.values(), default=1)
    return Layout(
        tuple(nodes),
        tuple(edges),
        width=2 * MARGIN + cols * BOX_W + (cols - 1) * GAP_X,
        height=2 * MARGIN + height_rows * BOX_H + (height_rows - 1) * GAP_Y,
    )

"""A version's ancestors laid out as a graph for a server-drawn SVG: the version on
top, its ancestors in rows by depth, an arrow from each version to what it was derived
from. Built only from what the lineage API answered the viewer, so an ancestor the
viewer may not see is neither drawn nor named. An ancestor reached only through such
versions is drawn with a dashed outline and a short dashed arrow coming into it from
nowhere ("through versions not shown"), rather than a line from the version that would
cross the rows between."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NODE_WIDTH = 190
NODE_HEIGHT = 46
GAP_X = 24
GAP_Y = 48
MARGIN = 12
MAX_NODES = 40
"""Ancestors drawn at most (the text list names every one)."""
LABEL_CHARS = 26
PER_ROW = 4
"""Nodes side by side at most; more of one depth wrap onto the next row."""


@dataclass(frozen=True)
class Node:
    ref: str
    """``owner/name:version``."""
    model: str
    version: str
    license: str
    relation: str
    """How the nearest descendant derived from it (empty for the version itself)."""
    depth: int
    x: float
    y: float

    @property
    def label(self) -> str:
        return _short(self.ref)

    @property
    def licence_label(self) -> str:
        return _short(self.license or "no licence")


@dataclass(frozen=True)
class Edge:
    """``child`` was derived from ``parent`` (``relation``); ``hidden``: through
    versions the viewer may not see."""

    child: str
    parent: str
    relation: str
    hidden: bool
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True)
class LineageGraph:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int
    omitted: int
    """Ancestors left out of the drawing (past ``MAX_NODES``)."""
    licences: tuple[str, ...] = ()
    """The distinct licences of every ancestor the viewer sees."""
    node_width: int = NODE_WIDTH
    node_height: int = NODE_HEIGHT


def ref_of(item: Mapping[str, Any]) -> str:
    """``owner/name:version`` of a lineage API node."""
    return f"{item.get('model')}:{item.get('version')}"


def lineage_graph(
    model: str,
    version: str,
    license: str,
    ancestors: Sequence[Mapping[str, Any]],
    parents: Mapping[str, Sequence[Mapping[str, Any]]],
    licences: Sequence[str] = (),
) -> LineageGraph:
    """The graph of ``model:version`` and its ``ancestors`` (the lineage API's items);
    ``parents``: each version's direct parents (its own lineage's depth-1 ancestors,
    as the viewer sees them), by ref."""
    root = {"model": model, "version": version, "license": license, "relation": "", "depth": 0}
    shown = [root, *sorted(ancestors, key=lambda a: int(a.get("depth") or 0))[:MAX_NODES]]
    by_depth: dict[int, list[Mapping[str, Any]]] = {}
    for item in shown:
        by_depth.setdefault(int(item.get("depth") or 0), []).append(item)
    # A depth with many ancestors wraps onto several rows, so the drawing stays readable
    # when scaled to the page.
    rows = [
        (depth, row[start : start + PER_ROW])
        for depth, row in sorted(by_depth.items())
        for start in range(0, len(row), PER_ROW)
    ]
    widest = max(len(row) for _, row in rows)
    width = int(2 * MARGIN + widest * NODE_WIDTH + (widest - 1) * GAP_X)
    height = int(2 * MARGIN + len(rows) * NODE_HEIGHT + (len(rows) - 1) * GAP_Y)
    nodes: dict[str, Node] = {}
    for level, (depth, row) in enumerate(rows):
        span = len(row) * NODE_WIDTH + (len(row) - 1) * GAP_X
        left = (width - span) / 2
        for index, item in enumerate(row):
            ref = ref_of(item)
            nodes[ref] = Node(
                ref=ref,
                model=str(item.get("model")),
                version=str(item.get("version")),
                license=str(item.get("license") or ""),
                relation=str(item.get("relation") or ""),
                depth=depth,
                x=round(left + index * (NODE_WIDTH + GAP_X), 1),
                y=float(MARGIN + level * (NODE_HEIGHT + GAP_Y)),
            )
    edges: list[Edge] = []
    reached: set[str] = set()
    for child in nodes.values():
        for parent in parents.get(child.ref, ()):
            target = nodes.get(ref_of(parent))
            if target is not None and target.ref != child.ref:
                edges.append(_edge(child, target, str(parent.get("relation") or ""), False))
                reached.add(target.ref)
    top = nodes[ref_of(root)]
    for node in nodes.values():
        if node.depth > 0 and node.ref not in reached:
            edges.append(_edge(top, node, node.relation, True))
    return LineageGraph(
        nodes=list(nodes.values()),
        edges=edges,
        width=width,
        height=height,
        omitted=max(len(ancestors) - MAX_NODES, 0),
        licences=tuple(licences),
    )


def _edge(child: Node, parent: Node, relation: str, hidden: bool) -> Edge:
    x2 = round(parent.x + NODE_WIDTH / 2, 1)
    return Edge(
        child=child.ref,
        parent=parent.ref,
        relation=relation,
        hidden=hidden,
        x1=x2 if hidden else round(child.x + NODE_WIDTH / 2, 1),
        y1=parent.y - GAP_Y * 0.7 if hidden else child.y + NODE_HEIGHT,
        x2=x2,
        y2=parent.y,
    )


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"

"""The lineage graph's layout from lineage API items: rows by depth, edges from each
version to its parents, a dashed edge for an ancestor reached only through versions
not shown, and the drawing capped."""

from __future__ import annotations

from typing import Any

from modelport.console.lineage_graph import (
    MAX_NODES,
    NODE_HEIGHT,
    NODE_WIDTH,
    PER_ROW,
    lineage_graph,
)


def item(
    ref: str, depth: int, license: str = "MIT", relation: str = "derived-from"
) -> dict[str, Any]:
    model, _, version = ref.partition(":")
    return {
        "model": model,
        "version": version,
        "license": license,
        "relation": relation,
        "depth": depth,
    }


def test_rows_by_depth_and_edges_to_parents() -> None:
    # small:2 derives from base:1 directly and through tuned:1 (a diamond).
    base, tuned = item("acme/base:1", 1, "Apache-2.0"), item("acme/tuned:1", 1)
    graph = lineage_graph(
        "globex/small",
        "2",
        "MIT",
        [base, tuned],
        {
            "globex/small:2": [base, tuned],
            "acme/tuned:1": [item("acme/base:1", 1, relation="fine-tuned-from")],
        },
    )
    nodes = {n.ref: n for n in graph.nodes}
    assert nodes["globex/small:2"].y < nodes["acme/base:1"].y == nodes["acme/tuned:1"].y
    assert nodes["acme/base:1"].x != nodes["acme/tuned:1"].x
    assert {(e.child, e.parent, e.relation, e.hidden) for e in graph.edges} == {
        ("globex/small:2", "acme/base:1", "derived-from", False),
        ("globex/small:2", "acme/tuned:1", "derived-from", False),
        ("acme/tuned:1", "acme/base:1", "fine-tuned-from", False),
    }
    assert all(e.x1 >= 0 and e.x2 <= graph.width for e in graph.edges)


def test_an_ancestor_reached_only_through_hidden_versions_hangs_dashed() -> None:
    far = item("acme/root:1", 2, "BSD-3-Clause")
    graph = lineage_graph("acme/tuned", "1", "MIT", [far], {"acme/tuned:1": []})
    [edge] = graph.edges
    assert (edge.child, edge.parent, edge.hidden) == ("acme/tuned:1", "acme/root:1", True)
    # A short arrow into it, not a line from the version across the rows between.
    root = next(n for n in graph.nodes if n.depth == 2)
    assert edge.x1 == edge.x2 and root.y - NODE_HEIGHT < edge.y1 < edge.y2 == root.y
    assert graph.height > 2 * NODE_HEIGHT


def test_the_drawing_is_capped_and_says_how_many_are_left_out() -> None:
    many = [item(f"acme/m{i}:1", 1) for i in range(MAX_NODES + 5)]
    graph = lineage_graph("acme/x", "1", "MIT", many, {"acme/x:1": many})
    assert len(graph.nodes) == MAX_NODES + 1 and graph.omitted == 5
    assert len(graph.edges) == MAX_NODES
    # One depth's many ancestors wrap onto rows of PER_ROW.
    assert graph.width < (PER_ROW + 1) * NODE_WIDTH
    assert len({n.y for n in graph.nodes}) == 1 + MAX_NODES // PER_ROW


def test_long_names_are_shortened_on_the_drawing_only() -> None:
    long = item("acme/" + "a" * 60 + ":1", 1, "Apache-2.0 AND BSD-3-Clause AND MIT")
    graph = lineage_graph("acme/x", "1", "MIT", [long], {"acme/x:1": [long]})
    node = next(n for n in graph.nodes if n.depth == 1)
    assert node.label.endswith("…") and len(node.label) <= 26
    assert node.ref == "acme/" + "a" * 60 + ":1"

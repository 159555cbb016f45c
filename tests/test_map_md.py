"""Map.md (exporters.map_md): a Mermaid graph of the rooms and a table per room, rendered
deterministically with safe ids and escaped labels (no database: made-up maps)."""

from __future__ import annotations

import random
import re

from exporters.map_md import mermaid_label, mermaid_node_id, render_map_md
from memstore.map_graph import MapGraph
from tests.map_helpers import (
    BEHIND,
    KITCHEN,
    NAMES,
    SCRIPT,
    WEIRD,
    WEST,
    sample_graph,
    script_events,
)

NODE = re.compile(r'^  r(\d+)\["([^"\[\]|`<>{}%]*)"\]$')
EDGE = re.compile(r'^  r(\d+) (-->|-\.->)\|"([^"\[\]|`<>{}%]*)"\| r(\d+)$')


def mermaid_lines(text: str) -> list[str]:
    start = text.index("```mermaid\n") + len("```mermaid\n")
    return text[start : text.index("\n```", start)].splitlines()


def room_section(text: str, heading: str) -> str:
    start = text.index(f"### {heading}\n")
    end = text.find("\n### ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_an_empty_map_says_so() -> None:
    assert render_map_md(MapGraph()) == "# Map\n\nNo rooms on the map yet.\n"


def test_the_same_map_renders_the_same_bytes_whatever_the_order_it_was_loaded_in() -> None:
    graph = sample_graph()
    shuffled = MapGraph()
    for table in ("rooms", "connections", "failures", "pruned"):
        items = list(getattr(graph, table).items())
        random.Random(7).shuffle(items)
        getattr(shuffled, table).update(items)
    assert render_map_md(shuffled) == render_map_md(graph)
    assert render_map_md(graph).endswith("\n") and "\r" not in render_map_md(graph)


def test_the_graph_has_a_node_per_room_and_an_edge_per_connection() -> None:
    graph = sample_graph()
    lines = mermaid_lines(render_map_md(graph))
    assert lines[0] == "graph TD"
    nodes = [match for match in map(NODE.match, lines) if match]
    edges = [match for match in map(EDGE.match, lines) if match]
    assert len(lines) == 1 + len(nodes) + len(edges)  # nothing else, and every line safe
    assert [int(n.group(1)) for n in nodes] == sorted(graph.rooms)
    assert len(edges) == len(graph.connections)
    found = {(int(e.group(1)), e.group(3), int(e.group(4))) for e in edges}
    assert found == {
        (c.from_id, c.command if not c.failures else f"{c.command} 1/2", c.to_id)
        for c in graph.connections.values()
    }


def test_routed_exits_are_solid_arrows_and_the_others_dotted() -> None:
    lines = mermaid_lines(render_map_md(sample_graph()))
    window = [line for line in lines if "Enter Window" in line]
    assert window == [f'  r{BEHIND} -.->|"Enter Window 1/2"| r{KITCHEN}']
    assert f'  r{WEST} -->|"north"| r137' in lines
    # a stricter threshold routes nothing that was taken only once
    strict = mermaid_lines(render_map_md(sample_graph(), threshold=0.7))
    assert f'  r{WEST} -->|"north"| r137' in strict  # taken twice: 0.75
    assert f'  r{KITCHEN} -.->|"up"| r187' in strict  # taken once: 0.67


def test_node_ids_are_numbers_and_labels_are_escaped() -> None:
    assert mermaid_node_id(137) == "r137"
    label = mermaid_label('A "b" [c] {d} |e| #f <g> `h` %% i\\j\n end')
    assert label == (
        '"A #quot;b#quot; #91;c#93; #123;d#125; #124;e#124; #35;f #lt;g#gt; #96;h#96; '
        '#37;#37; i#92;j end"'
    )
    text = render_map_md(sample_graph())
    weird = [line for line in mermaid_lines(text) if line.startswith(f"  r{WEIRD}[")]
    assert weird == [
        f'  r{WEIRD}["Weird #quot;room#quot; #91;a#124;b#93; #35;1 #lt;x#gt; #96;#37;#37; end '
        f'({WEIRD})"]'
    ]


def test_each_room_has_a_table_of_its_exits_with_confidence_and_counts() -> None:
    text = render_map_md(sample_graph())
    assert room_section(text, f"West of House ({WEST})") == (
        f"### West of House ({WEST})\n"
        "\n"
        "| Exit | Leads to | Status | Confidence | Taken | Failed | Seen |\n"
        "| --- | --- | --- | ---: | ---: | ---: | --- |\n"
        "| north | North of House (137) | routed | 0.75 | 2 | 0 | Ep1 T1 to Ep1 T18 |\n"
        "| west |  | blocked |  | 0 | 1 | Ep1 T2 |\n"
        "\n"
        "Untried: south, east, northeast, northwest, southeast, southwest, up, down, in, out.\n"
    )


def test_pruned_exits_and_doubtful_connections_are_shown_as_such() -> None:
    section = room_section(render_map_md(sample_graph()), f"Behind House ({BEHIND})")
    assert "| Enter Window | Kitchen (27) | not routed | 0.50 | 1 | 1 | Ep1 T7 |" in section
    assert "| west |  | pruned |  | 0 | 3 | Ep1 T6 |" in section


def test_markdown_in_room_names_cannot_break_a_heading_or_a_table() -> None:
    text = render_map_md(sample_graph())
    assert f'### Weird "room" \\[a\\|b\\] \\#1 \\<x\\> \\`%% end ({WEIRD})\n' in text
    row = next(line for line in text.splitlines() if line.startswith("| climb ladder |"))
    assert row.replace("\\|", "").count("|") == 8  # seven cells: no pipe of the name splits one


def test_the_summary_counts_rooms_connections_routes_and_pruned_exits() -> None:
    text = render_map_md(sample_graph())
    assert text.splitlines()[2] == "9 rooms, 12 connections (11 routed), 1 pruned exit."
    assert "above 0.5" in text


def test_a_room_reached_but_never_left_says_no_exit_was_tried() -> None:
    graph = MapGraph().apply_all(script_events([(WEST, "n", 137)]))
    section = room_section(render_map_md(graph), "North of House (137)")
    assert "No exit tried here yet." in section
    assert NAMES[WEST] in render_map_md(graph)


def test_times_unknown_to_the_map_are_left_empty() -> None:
    graph = sample_graph()
    key = (WEST, "north")
    graph.connections[key] = graph.connections[key]._replace(first_episode=0, last_episode=0)
    section = room_section(render_map_md(graph), f"West of House ({WEST})")
    assert "| north | North of House (137) | routed | 0.75 | 2 | 0 |  |" in section


def test_the_script_is_what_the_sample_map_holds() -> None:
    # guards the fixtures the other map tests rely on
    graph = sample_graph()
    assert len(graph.rooms) == len({r for step in SCRIPT for r in (step[0], step[2])})
    assert (BEHIND, "west") in graph.pruned and (WEST, "west") not in graph.pruned


def test_a_caller_rendering_a_graph_itself_gets_names_shown_not_raw() -> None:
    """render_map_md itself shows names as MapGraph.shown does (a caller need not know):
    an escape sequence in a room name would make git treat Map.md as binary and act on a
    terminal showing it."""
    graph = sample_graph()
    room = next(iter(graph.rooms))
    graph.rooms[room] = "Red\x1b[2J Room" + "x" * 500
    text = render_map_md(graph)
    assert "\x1b" not in text and "### Red␛" in text
    assert max(len(line) for line in text.splitlines()) < 400
    assert render_map_md(graph.shown()) == text  # showing twice changes nothing

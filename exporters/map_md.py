r"""Map.md: the map (issue 16) as Markdown for review, with a Mermaid graph a git host draws.

A pure function with no database and no I/O: :func:`render_map_md` takes a loaded
``memstore.map_graph.MapGraph`` and the route threshold and returns the text. Nothing
parses it back (``memstore map export-json`` / ``import-json`` carry a map between
databases).

Deterministic: the same map gives the same bytes. Rooms are listed by id; a room's exits
in the map's direction order (north, south, ..., in, out), then other actions by their
key; the Mermaid edges in the same order, room by room. No clock, no database name and
no random id is written, so the demo's Map.md is reproduced byte for byte.

Layout::

    # Map

    3 rooms, 2 connections (2 routed), 1 pruned exit.

    ## Graph
    ```mermaid
    graph TD
      r64["West of House (64)"]
      r64 -->|"north"| r137
      r27 -.->|"enter window 1/3"| r64
    ```

    ## Rooms

    ### West of House (64)

    | Exit | Leads to | Status | Confidence | Taken | Failed | Seen |
    | --- | --- | --- | ---: | ---: | ---: | --- |
    | north | North of House (137) | routed | 0.67 | 1 | 0 | Ep1 T1 |
    | east | | pruned | | 0 | 3 | Ep1 T5 |

    Untried: south, northeast, ...

Statuses: **routed** (``route`` uses it: confidence above the threshold, not pruned),
**not routed** (a connection at or below the threshold, or pruned), **blocked** (a direction that
failed here and never moved the player, not pruned yet), **pruned** (failed often enough
that it is not an exit; a later success un-prunes it). *Taken* counts verifications,
*Failed* failures; *Seen* is the first and last episode and turn (``Ep1 T3 to Ep2 T40``),
for a pruned exit when it was pruned; a map imported from a map_state.json has no such
times (episode 0) and leaves it empty.

Escaping: Mermaid node ids are ``r`` and the room number (never a name, so no room can
be called ``end`` or break the syntax); every label is quoted and the characters Mermaid
reads inside one (``" # & < > [ ] { } | ` % \``) are written as its entity codes
(``#quot;``, ``#35;``, ...); whitespace runs, line breaks included, are one space.
Markdown text (headings, table cells) is escaped with ``exporters.notes_md.escape_markdown``
(``|`` included), so a room name can neither end a cell nor start a structure of its own.
"""

from __future__ import annotations

import re

from exporters.notes_md import escape_markdown
from memstore.map_graph import (
    DEFAULT_ROUTE_CONFIDENCE,
    DIRECTIONS,
    Connection,
    ExitFailure,
    MapGraph,
    PrunedExit,
)

__all__ = ["FILE_TITLE", "is_map_md", "mermaid_label", "mermaid_node_id", "render_map_md"]

FILE_TITLE = "# Map"
TABLE_HEADER = (
    "| Exit | Leads to | Status | Confidence | Taken | Failed | Seen |",
    "| --- | --- | --- | ---: | ---: | ---: | --- |",
)

_MERMAID_ENTITIES = str.maketrans(
    {
        '"': "#quot;",
        "#": "#35;",
        "&": "#38;",
        "<": "#lt;",
        ">": "#gt;",
        "[": "#91;",
        "]": "#93;",
        "{": "#123;",
        "}": "#125;",
        "|": "#124;",
        "`": "#96;",
        "%": "#37;",
        "\\": "#92;",
    }
)


#: the lines every Map.md render_map_md writes begins with: the title, then the empty map's
#: line or the summary line, and (a map with rooms) the graph section after the legend
_EMPTY_LINE = "No rooms on the map yet."
_SUMMARY = re.compile(r"\d+ rooms?, \d+ connections? \(\d+ routed\), \d+ pruned exits?\.", re.ASCII)
_GRAPH_START = "\n## Graph\n\n```mermaid\ngraph TD\n"


def is_map_md(text: str) -> bool:
    """True when ``text`` has the layout :func:`render_map_md` writes (of any map, this
    database's or an older one): the title line, an empty line, the summary line (or the
    empty map's line) and, after it, the Mermaid graph section. Hand-written notes that
    only begin with ``# Map`` are not a Map.md. Line endings may be ``\\r\\n``."""
    text = text.replace("\r\n", "\n")
    lines = text.split("\n", 3)
    if len(lines) < 3 or lines[0] != FILE_TITLE or lines[1]:
        return False
    if lines[2] == _EMPTY_LINE:
        return True
    return _SUMMARY.fullmatch(lines[2]) is not None and _GRAPH_START in text


def mermaid_node_id(room: int) -> str:
    """A room's node id in the graph: ``r`` and its number (``r64``)."""
    return f"r{room}"


def mermaid_label(text: str) -> str:
    """``text`` as a quoted Mermaid label: one line, its special characters as entities."""
    return '"' + " ".join(text.split()).translate(_MERMAID_ENTITIES) + '"'


def _one_line(text: str) -> str:
    return escape_markdown(" ".join(text.split()))


def _room_label(graph: MapGraph, room: int) -> str:
    name = " ".join(graph.rooms.get(room, "").split())
    return f"{name} ({room})" if name else f"room {room}"


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def _at(episode: int, turn: int) -> str:
    """``Ep1 T3``; "" when the time is unknown (episode 0: imported from a JSON map)."""
    return f"Ep{episode} T{turn}" if episode > 0 else ""


def _seen(connection: Connection) -> str:
    first = _at(connection.first_episode, connection.first_turn)
    last = _at(connection.last_episode, connection.last_turn)
    if not first or first == last:
        return last
    return f"{first} to {last}" if last else first


def _edge_label(connection: Connection) -> str:
    label = connection.command
    if connection.failures:
        tries = connection.verifications + connection.failures
        label += f" {connection.verifications}/{tries}"
    return label


def _by_room(graph: MapGraph) -> dict[int, list[Connection]]:
    """Each room's connections: directions in the map's order, then actions by key."""
    order = {direction: index for index, direction in enumerate(DIRECTIONS)}
    rooms: dict[int, list[Connection]] = {}
    for connection in graph.connections.values():
        rooms.setdefault(connection.from_id, []).append(connection)
    for connections in rooms.values():
        connections.sort(key=lambda c: (order.get(c.direction or "", len(order)), c.action_key))
    return rooms


def _graph_lines(
    graph: MapGraph, by_room: dict[int, list[Connection]], threshold: float
) -> list[str]:
    lines = ["```mermaid", "graph TD"]
    for room in sorted(graph.rooms):
        lines.append(f"  {mermaid_node_id(room)}[{mermaid_label(_room_label(graph, room))}]")
    for room in sorted(by_room):
        for connection in by_room[room]:
            arrow = "-->" if graph.exit(connection, threshold).routable else "-.->"
            label = mermaid_label(_edge_label(connection))
            lines.append(
                f"  {mermaid_node_id(room)} {arrow}|{label}| {mermaid_node_id(connection.to_id)}"
            )
    lines.append("```")
    return lines


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _room_lines(
    graph: MapGraph, room: int, connections: list[Connection], threshold: float
) -> list[str]:
    exits = graph.exits(room, threshold)
    lines = [f"### {_one_line(_room_label(graph, room))}", ""]
    rows = []
    for connection in connections:
        exit_ = graph.exit(connection, threshold)
        rows.append(
            _row(
                _one_line(connection.command),
                _one_line(_room_label(graph, exit_.to_id)),
                "routed" if exit_.routable else "not routed",
                f"{exit_.confidence:.2f}",
                str(exit_.verifications),
                str(exit_.failures),
                _seen(connection),
            )
        )
    for status, directions in (("blocked", exits.blocked), ("pruned", exits.pruned)):
        for direction in directions:
            failed: ExitFailure | None = graph.failures.get((room, direction))
            pruned: PrunedExit | None = graph.pruned.get((room, direction))
            if pruned is not None and status == "pruned":
                seen = _at(pruned.episode, pruned.turn)
            else:
                seen = _at(failed.last_episode, failed.last_turn) if failed else ""
            rows.append(
                _row(direction, "", status, "", "0", str(failed.failures if failed else 0), seen)
            )
    if rows:
        lines += [*TABLE_HEADER, *rows, ""]
    else:
        lines += ["No exit tried here yet.", ""]
    if exits.untried:
        lines += [f"Untried: {', '.join(exits.untried)}.", ""]
    return lines


def render_map_md(graph: MapGraph, *, threshold: float = DEFAULT_ROUTE_CONFIDENCE) -> str:
    """Map.md for ``graph`` (see the module docstring for the layout, order and escaping);
    ``threshold`` is the confidence routes need (``MemstoreConfig.map_route_confidence``).
    Names and actions are written as ``MapGraph.shown`` gives them (one bounded line,
    control characters visible), whoever calls this."""
    graph = graph.shown()
    lines = [FILE_TITLE, ""]
    if not graph.rooms:
        lines += [_EMPTY_LINE, ""]
        return "\n".join(lines)
    connections = len(graph.connections)
    by_room = _by_room(graph)
    routed = sum(graph.exit(c, threshold).routable for c in graph.connections.values())
    lines += [
        f"{_plural(len(graph.rooms), 'room')}, {_plural(connections, 'connection')} "
        f"({routed} routed), {_plural(len(graph.pruned), 'pruned exit')}.",
        "",
        f"Confidence of an exit taken v times that failed f times is (v + 1) / (v + f + 2); "
        f"routes use exits whose confidence is above {threshold:g} and never a pruned one. "
        "In the graph, solid arrows are routed and dotted ones are not; a label's v/n says "
        "how many of n tries moved the player there.",
        "",
        "## Graph",
        "",
        *_graph_lines(graph, by_room, threshold),
        "",
        "## Rooms",
        "",
    ]
    for room in sorted(graph.rooms):
        lines += _room_lines(graph, room, by_room.get(room, []), threshold)
    return "\n".join(lines)

"""What the agent sees at a location: memory lines within a token budget (spec 000, 002).

Pure functions over rows the store hands in; no SQL here. Display order follows spec 002:
active persistent memories, then active ephemeral ones, then a marked TENTATIVE section.
When the budget is tight, memories are chosen in priority order instead: DANGER first, then
CORE (spawn state), then PERMANENT, then EPHEMERAL, then TENTATIVE, newest first within a
group, and a closing line says how many were left out.
"""

from __future__ import annotations

from typing import NamedTuple

from memstore.tokens import count_tokens

TENTATIVE_HEADER = "⚠️  TENTATIVE MEMORIES (unconfirmed, may be invalidated):"
MARKERS = {"core": " [spawn]", "ephemeral": " [session]", "permanent": ""}


class ContextRow(NamedTuple):
    """One non-superseded memory, as the store reads it for the agent's context."""

    category: str
    title: str
    text: str
    persistence: str
    status: str


def _line(row: ContextRow, markers: bool) -> str:
    marker = MARKERS[row.persistence] if markers else ""
    body = f"[{row.category}] {row.title}: {row.text}{marker}"
    return f"  {body}" if row.status == "TENTATIVE" else body


def _priority(index: int, row: ContextRow) -> tuple[int, int, int]:
    if row.status == "TENTATIVE":
        group = 4
    elif row.category == "DANGER":
        group = 0
    else:
        group = {"core": 1, "permanent": 2, "ephemeral": 3}[row.persistence]
    return (group, -index, 0)


def left_out_line(count: int) -> str:
    return f"({count} more {'memory' if count == 1 else 'memories'} not shown)"


def format_location_memory(
    rows: list[ContextRow], token_budget: int, show_markers: bool = True
) -> str:
    """Format ``rows`` (display order: persistent then ephemeral, oldest first) for the agent.

    Returns "" when there is nothing to show. The result's token count (cl100k_base) stays
    within ``token_budget``, the closing "not shown" line included.
    """
    if not rows:
        return ""
    lines = [_line(row, show_markers) for row in rows]
    costs = [count_tokens(line) + 1 for line in lines]  # +1 for the newline
    has_tentative = any(row.status == "TENTATIVE" for row in rows)
    header_cost = count_tokens(TENTATIVE_HEADER) + 2 if has_tentative else 0
    if sum(costs) + header_cost <= token_budget:
        chosen = set(range(len(rows)))
    else:
        chosen = _choose(rows, costs, token_budget, header_cost)
    return _assemble(rows, lines, chosen)


def _choose(rows: list[ContextRow], costs: list[int], budget: int, header_cost: int) -> set[int]:
    """Greedy by priority; reserves room for the "not shown" line and the tentative header."""
    remaining = budget - (count_tokens(left_out_line(len(rows))) + 1)
    chosen: set[int] = set()
    header_paid = False
    for index in sorted(range(len(rows)), key=lambda i: _priority(i, rows[i])):
        cost = costs[index]
        if rows[index].status == "TENTATIVE" and not header_paid:
            cost += header_cost
        if cost <= remaining:
            remaining -= cost
            chosen.add(index)
            header_paid = header_paid or rows[index].status == "TENTATIVE"
    return chosen


def _assemble(rows: list[ContextRow], lines: list[str], chosen: set[int]) -> str:
    active = [lines[i] for i in sorted(chosen) if rows[i].status != "TENTATIVE"]
    tentative = [lines[i] for i in sorted(chosen) if rows[i].status == "TENTATIVE"]
    out = list(active)
    if tentative:
        if out:
            out.append("")
        out.append(TENTATIVE_HEADER)
        out.extend(tentative)
    missing = len(rows) - len(chosen)
    if missing:
        out.append(left_out_line(missing))
    return "\n".join(out)

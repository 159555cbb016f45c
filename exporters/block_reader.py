"""The reader of Memories.md fed block by block (the pieces between empty lines).

A location's header and visits line, or a run of memories, in the renderer's exact layout
is read in one match (``exporters.fast_blocks``); every other block goes line by line
through the same state (``exporters.line_parser.LineParser``). A property test checks
that this gives what ``read_line_by_line`` gives.
"""

from __future__ import annotations

from exporters.fast_blocks import (
    LOCATION_BLOCK_START,
    MEMORY_BLOCK_START,
    read_location_block,
    read_memory_run,
)
from exporters.line_parser import LineParser, Problem
from memstore.md_rows import LocationRows

__all__ = ["read_body"]


def read_body(text: str) -> tuple[list[LocationRows], list[Problem], bool]:
    """What ``exporters.line_parser.read_line_by_line`` returns, read block by block, and
    whether every memory block took the fast path. Never raises."""
    parser = LineParser()
    _run_blocks(parser, text)
    locations, problems = parser.finish()
    return locations, problems, parser.slow_memory_blocks == 0


def _run_blocks(parser: LineParser, text: str) -> None:
    """Read ``text`` block by block into ``parser``: gives what ``run_lines`` over the
    whole text gives."""
    number = 1
    blocks = text.split("\n\n")
    count = len(blocks)
    index = 0
    while index < count:
        block = blocks[index]
        if index:  # the empty line between this block and the one before
            parser.in_stray_text = False
            if parser.memory is not None or parser.skipping_memory:
                parser.finish_memory()
            number += 1
        index += 1
        if block.startswith(MEMORY_BLOCK_START):
            location = parser.location
            if location is not None and not parser.skipping_location and parser.memory is None:
                # The common case: a run of memories, each read in one match, up to the
                # first block that is not one (the empty lines between them change
                # nothing in the state); that block is read again below.
                run, breaks = read_memory_run(blocks, index - 1)
                if run:
                    parser.add_memories(run)
                    index += len(run) - 1
                    # each block's lines and the empty line after it (but the last's)
                    number += breaks + 2 * len(run) - 1
                    if index < count and blocks[index] == "---":
                        # the separator after a location's memories, read as below
                        parser.in_stray_text = False
                        parser.close_section()
                        index += 1
                        number += 2
                    continue
                parser.slow_memory_blocks += 1
        elif block == "---" or block == "### Memories":  # as run_lines reads them
            parser.finish_memory()
            if block == "---":
                parser.close_section()
            number += 1
            continue
        elif block.startswith(LOCATION_BLOCK_START):
            found = read_location_block(block)
            if found is not None and parser.open_location(number, found):
                number += 2
                if index < count and blocks[index] == "### Memories":
                    # the heading under a location's header, read as below
                    parser.in_stray_text = False
                    index += 1
                    number += 2
                continue
        lines = block.split("\n")
        parser.run_lines(lines, number)
        number += len(lines)

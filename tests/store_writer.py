"""A writer process for the durability tests: adds memories and acknowledges each on stdout.

Usage: python tests/store_writer.py DB NAME COUNT
"""

from __future__ import annotations

import sys

from memstore.models import Memory
from memstore.store import MemoryStore


def main() -> None:
    db, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with MemoryStore.open(db) as store:
        for i in range(count):
            title = f"{name} memory {i}"
            memory = Memory(
                category="NOTE",
                title=title,
                text="x" * 200,
                episode=1,
                turns=str(i),
                persistence="permanent",
            )
            ok = store.add_memory(i % 37, f"Room {i % 37}", memory)
            if not ok:
                raise SystemExit(f"add_memory refused {title}")
            print(f"ack {title}", flush=True)


if __name__ == "__main__":
    main()

"""What every `m3 memory …` tool shares (store/tools and milvus/tools): a refusal is one line on stderr and
exit 2, never a traceback."""

from __future__ import annotations

import functools
import json
import sqlite3
import sys
from collections.abc import Callable

from m3_memory.errors import ModelMissingError, StoreError


def fail(command: str, error: Exception | str, report: dict | None = None) -> int:
    print(f"m3 memory {command}: error: {error}", file=sys.stderr)
    if report is not None:
        print(json.dumps(report))
    return 2


def command(name: str) -> Callable[[Callable[[list[str] | None], int]], Callable[[list[str] | None], int]]:
    """The tool's refusals (no or bad store, bad export or pickle, a full disk) as one line, exit 2."""

    def wrap(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
        @functools.wraps(main)
        def run(argv: list[str] | None = None) -> int:
            try:
                return main(argv)
            except (StoreError, ModelMissingError, OSError, ValueError, sqlite3.Error) as error:
                return fail(name, error)

        return run

    return wrap

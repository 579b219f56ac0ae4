"""Error codes shared by the search API and the services (values match src/m3_interfaces/srv/*.srv)."""

from __future__ import annotations

OK = 0
EMPTY_QUERY = 1
QUERY_TOO_LONG = 2
INVALID_ARGUMENT = 3
INVALID_IMAGE = 4
INVALID_AUDIO = 5
STORE_UNAVAILABLE = 6
UNKNOWN_ENTITY = 7
INTERNAL_ERROR = 255

CODE_NAMES = {
    OK: "OK",
    EMPTY_QUERY: "EMPTY_QUERY",
    QUERY_TOO_LONG: "QUERY_TOO_LONG",
    INVALID_ARGUMENT: "INVALID_ARGUMENT",
    INVALID_IMAGE: "INVALID_IMAGE",
    INVALID_AUDIO: "INVALID_AUDIO",
    STORE_UNAVAILABLE: "STORE_UNAVAILABLE",
    UNKNOWN_ENTITY: "UNKNOWN_ENTITY",
    INTERNAL_ERROR: "INTERNAL_ERROR",
}


class MemoryApiError(Exception):
    """A request the memory cannot answer; carries the service error code so adapters need no mapping."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{CODE_NAMES.get(code, code)}: {message}")
        self.code = code
        self.message = message


class StoreError(Exception):
    """The memory directory cannot be opened or is damaged (maps to STORE_UNAVAILABLE)."""


class SchemaVersionError(StoreError):
    """The store was written by a newer schema; it is never overwritten by an older program."""


class ModelMissingError(RuntimeError):
    """A model file the memory needs is not installed."""

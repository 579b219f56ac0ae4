"""The checks every search request passes where it enters the search API: a refused value is a MemoryApiError
with the service's error code, never read as "no limit" or clipped."""

from __future__ import annotations

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.search.as_of import AsOfError, check_as_of

MAX_TOP_K = 100


def check_query(query: str, max_chars: int, required: bool) -> str:
    """The query stripped; INVALID_ARGUMENT (not text), QUERY_TOO_LONG or, when required, EMPTY_QUERY."""
    if not isinstance(query, str):
        raise MemoryApiError(errors.INVALID_ARGUMENT, "query must be a string")
    if len(query) > max_chars:
        raise MemoryApiError(errors.QUERY_TOO_LONG, f"query has {len(query)} characters; the limit is {max_chars}")
    if required and not query.strip():
        raise MemoryApiError(errors.EMPTY_QUERY, "query is empty")
    return query.strip()


def check_top_k(top_k: int) -> int:
    if not 1 <= int(top_k) <= MAX_TOP_K:
        raise MemoryApiError(errors.INVALID_ARGUMENT, f"top_k must be in 1..{MAX_TOP_K}, got {top_k}")
    return int(top_k)


def check_limits(before_clip: int, before_stamp_ns: int) -> None:
    """The as-of limits (search.as_of) as the services' INVALID_ARGUMENT."""
    try:
        check_as_of(before_clip, before_stamp_ns)
    except AsOfError as error:
        raise MemoryApiError(errors.INVALID_ARGUMENT, str(error)) from None

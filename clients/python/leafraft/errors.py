"""Typed errors: the server's stable codes (`docs/api.md#error-codes`) as exception classes, plus what can only
happen on the client's side (no answer in time, a closed handle, a bad configuration)."""

from enum import Enum
from typing import Dict, Optional, Type


class ErrorCode(str, Enum):
    """Every code the server answers with, spelled as the server spells it."""

    NOT_READY = "NOT_READY"
    TAG_NOT_FOUND = "TAG_NOT_FOUND"
    SEGMENTS_NOT_READY = "SEGMENTS_NOT_READY"
    CLOCK_BACKWARDS = "CLOCK_BACKWARDS"
    WORKER_UNAVAILABLE = "WORKER_UNAVAILABLE"
    TAG_EXHAUSTED = "TAG_EXHAUSTED"
    NO_LEADER = "NO_LEADER"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    TAG_EXISTS = "TAG_EXISTS"
    MAX_ID_DECREASE = "MAX_ID_DECREASE"
    NOT_A_LEARNER = "NOT_A_LEARNER"
    LAST_VOTER = "LAST_VOTER"
    NODE_NOT_FOUND = "NODE_NOT_FOUND"
    UNAUTHORIZED = "UNAUTHORIZED"
    FORBIDDEN = "FORBIDDEN"
    NOT_FOUND = "NOT_FOUND"
    CLUSTER_MISMATCH = "CLUSTER_MISMATCH"
    LEARNER_NOT_CAUGHT_UP = "LEARNER_NOT_CAUGHT_UP"
    MODE_MISMATCH = "MODE_MISMATCH"
    NAMESPACE_EXISTS = "NAMESPACE_EXISTS"
    NAMESPACE_NOT_FOUND = "NAMESPACE_NOT_FOUND"
    SECOND_EXHAUSTED = "SECOND_EXHAUSTED"
    CLOCK_AHEAD = "CLOCK_AHEAD"
    FEATURE_NOT_ENABLED = "FEATURE_NOT_ENABLED"
    CLOCK_UNCHECKED = "CLOCK_UNCHECKED"
    MEMBERS_BEHIND = "MEMBERS_BEHIND"

    @property
    def transient(self) -> bool:
        """Another node, or the same one a little later, may serve it: the 503 codes."""
        return self in _TRANSIENT


_TRANSIENT = {
    ErrorCode.NOT_READY, ErrorCode.SEGMENTS_NOT_READY, ErrorCode.CLOCK_BACKWARDS,
    ErrorCode.WORKER_UNAVAILABLE, ErrorCode.NO_LEADER, ErrorCode.SECOND_EXHAUSTED,
    ErrorCode.CLOCK_AHEAD, ErrorCode.CLOCK_UNCHECKED, ErrorCode.MEMBERS_BEHIND,
}


class LeafraftError(Exception):
    """Everything this package raises."""


class ApiError(LeafraftError):
    """A node answered an error in the API's shape. `code` is an ErrorCode, or the raw string of
    a code this version does not know. Each known code has its own subclass (TagNotFound, ...)."""

    def __init__(self, status: int, code, message: str):
        super().__init__(f"{code.value if isinstance(code, ErrorCode) else code} ({status}): {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def transient(self) -> bool:
        return (isinstance(self.code, ErrorCode) and self.code.transient) or self.status >= 500


class Timeout(LeafraftError, TimeoutError):
    """The call's time budget ran out; `last` is the last failure seen on the way."""

    def __init__(self, waited: float, last: str):
        super().__init__(f"no answer within {waited:.3f} s; last: {last}")
        self.waited = waited
        self.last = last


class TransportError(LeafraftError):
    """No node could be reached, or one answered something that is not the API's shape."""


class Closed(LeafraftError):
    """The handle or client was closed; its unused IDs were dropped (a gap, never served)."""


class ConfigError(LeafraftError, ValueError):
    """The client was given something unusable."""


def _class_name(code: ErrorCode) -> str:
    return "".join(part.capitalize() for part in code.value.split("_"))


#: The subclass of ApiError for each known code: ``except leafraft.TagNotFound``.
ERROR_CLASSES: Dict[ErrorCode, Type[ApiError]] = {
    code: type(_class_name(code), (ApiError,), {"__doc__": f"The server answered {code.value}."})
    for code in ErrorCode
}
globals().update({cls.__name__: cls for cls in ERROR_CLASSES.values()})


def api_error(status: int, code: str, message: str) -> ApiError:
    try:
        known: Optional[ErrorCode] = ErrorCode(code)
    except ValueError:
        known = None
    if known is None:
        return ApiError(status, code, message)
    return ERROR_CLASSES[known](status, known, message)


def code_of(error: BaseException):
    """The server's code in `error`, or None when no server answered with one."""
    return error.code if isinstance(error, ApiError) else None

"""The one error hierarchy every user-reachable refusal belongs to.

Each subclass has a stable kebab-case ``code`` (the contract with API clients,
who see it as ``extensions.code``) and structured ``details`` (a JSON-safe
dict, shown as ``extensions.details``). Messages are for humans and may change;
codes and detail keys may not.
"""

from __future__ import annotations

from typing import Any, ClassVar


class KinflowError(Exception):
    """Base of every refusal a user can reach."""

    code: ClassVar[str] = "kinflow-error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class ConfigurationError(KinflowError):
    """The settings or the environment cannot work (missing extra, bad URI, locked data dir)."""

    code = "configuration-error"


class LakeUnavailable(KinflowError):
    """The lake did not answer in time."""

    code = "lake-unavailable"


class RevisionConflict(KinflowError):
    """A fenced write found a different ``_rev`` (or no document) than the one loaded."""

    code = "revision-conflict"


class DocumentExists(KinflowError):
    """A create-only write met an existing ``_id``."""

    code = "document-exists"


class DocumentNotFound(KinflowError):
    code = "document-not-found"


class ConcurrentModification(KinflowError):
    """A transaction kept conflicting after every bounded retry."""

    code = "concurrent-modification"


class GdrError(KinflowError):
    """A global document reference is malformed."""

    code = "gdr-invalid"


class InvalidInput(KinflowError):
    """A value sent by a caller has the wrong shape."""

    code = "invalid-input"


class DatasetNotFound(KinflowError):
    """A request named a dataset that is neither configured nor in the lake (none is created)."""

    code = "dataset-not-found"


class TooManyStreams(KinflowError):
    """Opening another change stream would pass the per-process cap (``max_hub_streams``)."""

    code = "too-many-streams"


class ServerUnreachable(KinflowError):
    """A kinflow server given by URL did not answer."""

    code = "server-unreachable"


class PortInUse(KinflowError):
    """``kinflow serve`` / ``demo``: the address to listen on is taken by another process."""

    code = "port-in-use"

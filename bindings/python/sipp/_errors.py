"""The exceptions of the sipp package.

Every error the package raises is a SippError. Its subclasses follow libsipp's sipp_status codes one
to one (a failed C call raises the class of the status it returned, with libsipp's own message), and
also derive from the matching built-in exception where one exists, so that ``except
FileNotFoundError`` catches a missing model file and ``except ValueError`` catches bad options.
"""


class SippError(Exception):
    """Base class of every sipp error.

    Attributes:
        status: libsipp's status name ("invalid_argument", "not_found", ...), or "gateway" for an
            HTTP failure of a gateway endpoint.
        message: the one-line message (also ``str(err)``).
    """

    status = "error"

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidArgumentError(SippError, ValueError):
    """A parameter or input is wrong; the message names it."""

    status = "invalid_argument"


class NotFoundError(SippError, FileNotFoundError):
    """A file, model, endpoint or key does not exist."""

    status = "not_found"


class SippIOError(SippError, OSError):
    """Reading or writing failed."""

    status = "io_error"


class ModelError(SippError):
    """The file is not a usable GGUF model, or the model cannot do what was asked."""

    status = "model_error"


class BackendError(SippError):
    """A backend is unknown, not compiled into the chosen artifact, not available, or failed."""

    status = "backend_error"


class ContextFullError(SippError):
    """The prompt (plus generation) does not fit the context."""

    status = "context_full"


class BusyError(SippError):
    """The engine's queue is full; try again later."""

    status = "busy"


class CancelledError(SippError):
    """The request was cancelled."""

    status = "cancelled"


class SippTimeoutError(SippError, TimeoutError):
    """A deadline passed."""

    status = "timeout"


class NoMemoryError(SippError, MemoryError):
    """An allocation failed."""

    status = "no_memory"


class ClosedError(SippError):
    """The client, endpoint or engine is closed."""

    status = "closed"


class InternalError(SippError):
    """llama.cpp failed in a way sipp did not expect."""

    status = "internal_error"


class NotSupportedError(SippError, NotImplementedError):
    """The endpoint or the loaded libsipp cannot do this (e.g. embeddings on an old libsipp)."""

    status = "not_supported"


class GatewayError(SippError):
    """A gateway endpoint answered with an HTTP error or could not be reached.

    Attributes:
        http_status: the HTTP status code, or None when the gateway could not be reached.
        code: the ``error.code`` of the gateway's OpenAI-shaped error body, when it sent one.
    """

    status = "gateway"

    def __init__(self, message, http_status=None, code=None):
        super().__init__(message)
        self.http_status = http_status
        self.code = code


# sipp_status values in the order of include/sipp.h, mapped to their exception class.
STATUS_CLASSES = [
    None,  # SIPP_OK
    InvalidArgumentError,
    NotFoundError,
    SippIOError,
    ModelError,
    BackendError,
    ContextFullError,
    BusyError,
    CancelledError,
    SippTimeoutError,
    NoMemoryError,
    ClosedError,
    InternalError,
]

# The same classes by status name, for errors that arrive as names (a gateway's error.code).
NAME_CLASSES = {cls.status: cls for cls in STATUS_CLASSES if cls is not None}


def error_for_status(status, message):
    """The exception for a sipp_status code and libsipp's message."""
    cls = STATUS_CLASSES[status] if 0 < status < len(STATUS_CLASSES) else SippError
    return cls(message)

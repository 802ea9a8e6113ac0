"""The SDK's exceptions. A program that exits non-zero is a result, not
an exception: these are for runs that Airlock refused or could not make."""


class AirlockError(Exception):
    """Airlock could not run the code: the API, the cluster, a lost watch."""


class RejectedError(AirlockError):
    """The request was refused before the program ran, naming the field.

    ``field`` is the path the API server (or the controller) named, such as
    ``spec.timeoutSeconds``; ``None`` when it named none.
    """

    def __init__(self, message, field=None):
        super().__init__(message)
        self.field = field


class SessionEndedError(AirlockError):
    """The session has ended (or was closed here): no step can run in it.

    ``reason`` is the session's ``status.reason`` (``IdleTimeout``,
    ``Expired``, ``OOMKilled``, ``Closed``, ...); ``session`` its name.
    """

    def __init__(self, message, session=None, reason=None):
        super().__init__(message)
        self.session = session
        self.reason = reason


class SessionFileNotFoundError(AirlockError):
    """``Session.files`` was asked for a path the sandbox does not have."""

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

"""Airlock's Python SDK: run untrusted code in gVisor sandboxes on
Kubernetes, as CodeExecutions (airlock.dev/v1alpha1).

    import airlock
    c = airlock.Client()
    r = c.run("print(6*7)")
    print(r.stdout, r.exit_code)
"""

from . import tools
from ._async import AsyncClient, AsyncSession
from ._client import Artifact, Client, Result, build_spec
from ._session import FileEntry, Session, SessionStatus
from .errors import AirlockError, RejectedError, SessionEndedError, SessionFileNotFoundError

__all__ = ["Client", "AsyncClient", "Result", "Artifact", "AirlockError", "RejectedError", "tools",
           "build_spec", "Session", "AsyncSession", "SessionStatus", "FileEntry",
           "SessionEndedError", "SessionFileNotFoundError"]
__version__ = "0.1.0"

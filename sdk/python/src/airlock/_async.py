"""The same client for asyncio: each blocking call on a worker thread
(the official ``kubernetes`` client is synchronous), the callbacks back on
the event loop, and a cancelled task cancelling its execution."""

import asyncio
import functools

from ._client import Client, Result, new_name
from ._session import Session, SessionStatus
from .errors import AirlockError, RejectedError


def _on_loop(loop, cb):
    """cb, called on loop from the worker thread that calls the result."""
    if cb is None:
        return None

    def call(chunk):
        try:
            loop.call_soon_threadsafe(cb, chunk)
        except RuntimeError:
            pass            # the loop is closed: nobody is listening
    return call


class AsyncClient:
    """``Client``'s methods, awaited. Arguments as ``Client``'s."""

    def __init__(self, *args, **kwargs):
        self.sync = Client(*args, **kwargs)
        self.namespace = self.sync.namespace

    async def _call(self, fn, *args, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(fn, *args, **kwargs))

    async def create(self, code, runtime="python", **kwargs) -> str:
        return await self._call(self.sync.create, code, runtime, **kwargs)

    async def get(self, name) -> Result:
        return await self._call(self.sync.get, name)

    async def cancel(self, name) -> None:
        await self._call(self.sync.cancel, name)

    async def delete(self, name) -> None:
        await self._call(self.sync.delete, name)

    async def wait(self, name, timeout=None, on_stdout=None, on_stderr=None) -> Result:
        loop = asyncio.get_running_loop()
        return await self._call(self.sync.wait, name, timeout, _on_loop(loop, on_stdout),
                                _on_loop(loop, on_stderr))

    async def run(self, code, runtime="python", *, on_stdout=None, on_stderr=None,
                  **kwargs) -> Result:
        """Run code; a cancelled task cancels the execution (its Cancelled
        is not awaited) and raises CancelledError."""
        name = kwargs.pop("name", None) or new_name()
        kwargs.setdefault("stream", on_stdout is not None or on_stderr is not None)
        create = asyncio.ensure_future(self.create(code, runtime, name=name, **kwargs))
        try:
            # Shielded: a cancel during the create lets it finish, then
            # cancels what it made.
            await asyncio.shield(create)
            return await self.wait(name, on_stdout=on_stdout, on_stderr=on_stderr)
        except asyncio.CancelledError:
            try:
                await create
                await asyncio.shield(self.cancel(name))
            except (AirlockError, asyncio.CancelledError):
                pass                # never made; or gone already
            raise

    def session(self, runtime="python", **kwargs) -> "AsyncSession":
        """``Client.session``, to be awaited or used with ``async with``."""
        return AsyncSession(self, runtime, kwargs)


class AsyncSession:
    """``Session``'s methods, awaited: ``async with client.session(...) as
    s`` (closed on exit) or ``s = await client.session(...)``. A task
    cancelled while the session is made lets the create finish, then
    closes what it made."""

    def __init__(self, client: AsyncClient, runtime: str, kwargs: dict):
        self.client = client
        self._args = (runtime, kwargs)
        self.sync: Session = None
        self.files = AsyncSessionFiles(self)

    @property
    def name(self) -> str:
        return self._open_one().name

    def _open_one(self) -> Session:
        if self.sync is None:
            raise AirlockError("the session is not open yet: await client.session(...) or "
                               "use async with")
        return self.sync

    @property
    def runtime(self) -> str:
        return self._args[0]

    async def _open(self) -> "AsyncSession":
        if self.sync is not None:
            return self
        runtime, kwargs = self._args
        opening = asyncio.ensure_future(
            self.client._call(Session.open, self.client.sync, runtime, **kwargs))
        try:
            self.sync = await asyncio.shield(opening)
        except asyncio.CancelledError:
            try:
                s = await opening
                await asyncio.shield(self.client._call(s.close))
            except (AirlockError, asyncio.CancelledError):
                pass                # never made; or gone already
            raise
        return self

    def __await__(self):
        return self._open().__await__()

    async def __aenter__(self) -> "AsyncSession":
        return await self._open()

    async def __aexit__(self, exc_type, exc, tb):
        if exc_type is None:
            await self.close()
        else:
            await self.client._call(self.sync._close_quietly)

    async def run(self, code, **kwargs) -> Result:
        """``Session.run``; a cancelled task cancels the step."""
        self._open_one()._check_open()
        try:
            return await self.client.run(code, self.runtime, session=self.name, **kwargs)
        except RejectedError as e:
            err = await self.client._call(self.sync._step_rejected, e)
            if err is e:
                raise
            raise err from e

    async def status(self) -> SessionStatus:
        return await self.client._call(self._open_one().status)

    async def close(self) -> None:
        if self.sync is not None:
            await self.client._call(self.sync.close)


class AsyncSessionFiles:
    """``SessionFiles``, awaited."""

    def __init__(self, session: AsyncSession):
        self.session = session

    async def write(self, path, data) -> str:
        return await self.session.client._call(self.session._open_one().files.write, path, data)

    async def read(self, path, format="text"):
        return await self.session.client._call(self.session._open_one().files.read, path, format)

    async def list(self, path="."):
        return await self.session.client._call(self.session._open_one().files.list, path)

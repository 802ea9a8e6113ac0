"""The same client for asyncio: each blocking call on a worker thread
(the official ``kubernetes`` client is synchronous), the callbacks back on
the event loop, and a cancelled task cancelling its execution."""

import asyncio
import functools

from ._client import Client, Result, new_name
from .errors import AirlockError


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

        def on_loop(cb):
            if cb is None:
                return None

            def call(chunk):
                try:
                    loop.call_soon_threadsafe(cb, chunk)
                except RuntimeError:
                    pass            # the loop is closed: nobody is listening
            return call

        return await self._call(self.sync.wait, name, timeout, on_loop(on_stdout),
                                on_loop(on_stderr))

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

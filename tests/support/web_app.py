"""An aiohttp application served on 127.0.0.1 for a test (a fake backend at the network boundary)."""

from __future__ import annotations

from aiohttp import web


async def start_app(app: web.Application) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on a free loopback port: its runner (``await runner.cleanup()`` stops it) and port."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

"""``gitmem mcp --url URL --key KEY``: the stdio bridge to a server's MCP endpoint."""

from __future__ import annotations

import sys

import anyio
import click

from gitmem.cli.base import main


@main.command("mcp")
@click.option("--url", envvar="GITMEM_URL", required=True, help="The gitmem server, e.g. http://127.0.0.1:8765")
@click.option("--key", envvar="GITMEM_API_KEY", required=True, help="An API key, user token or task token.")
def mcp_bridge(url: str, key: str) -> None:
    """Serve MCP on stdin/stdout for a desktop client, relayed to the server's /mcp (opens no store)."""
    from gitmem.sync.mcp_bridge import BridgeRefused, run_bridge

    try:
        anyio.run(run_bridge, url, key)
    except BridgeRefused as refused:
        click.echo(f"gitmem: {refused}", err=True)
        sys.exit(1)

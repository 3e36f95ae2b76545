"""What the push hooks run: ``gitmem hook pre-receive|post-receive`` (``hooks/pre-receive``,
``hooks/post-receive``), the engine's :func:`gitmem.engine.push.receive.run_hook` on the settings the
server handed down.

Git starts each hook once per push, so ``python -m gitmem hook pre-receive|post-receive`` comes here
straight from :mod:`gitmem.__main__`, without the command-line framework: click and the commands'
shared options cost a hook about 50 ms of CPU, a fifth of its run. ``gitmem hook`` (:mod:`gitmem.cli.node.internal`)
runs the same function.
"""

from __future__ import annotations

import sys
from typing import Literal

PushHook = Literal["pre-receive", "post-receive"]
PUSH_HOOKS: tuple[PushHook, ...] = ("pre-receive", "post-receive")


def run(name: PushHook) -> int:
    """One run of a push hook, on this process's standard input, error and environment; its exit status."""
    from gitmem.config.handoff import from_environment
    from gitmem.config.home import push_options
    from gitmem.engine.push.receive import run_hook

    # The settings the server handed down (GITMEM_CHECKED), read here, where the hook starts.
    return run_hook(name, sys.stdin, sys.stderr, lambda: push_options(from_environment()))

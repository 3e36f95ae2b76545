"""``python -m gitmem``: the same as the ``gitmem`` command.

Git starts two commands of it often: the push hooks (``python -P -m gitmem hook pre-receive|post-receive``,
twice a push) and a keyed clone's encryption filter (``git-filter process``, or ``smudge|clean|textconv
PATH`` once a file). Those command lines go straight to what they run, without loading the command-line
framework, which does nothing they need (about 50 ms of CPU a start); any other arguments, and any of
theirs that the framework would read otherwise (``--help``, a PATH like an option), still go through it.
"""

import sys


def _fast_path(args: list[str]) -> int | None:
    """The exit status of a hook or filter run without the framework, or None for any other command."""
    if len(args) == 2 and args[0] == "hook" and args[1] in ("pre-receive", "post-receive"):
        from gitmem.hooks import push

        return push.run("pre-receive" if args[1] == "pre-receive" else "post-receive")
    one_file = len(args) == 3 and args[1] in ("smudge", "clean", "textconv") and not args[2].startswith("-")
    if args[:1] == ["git-filter"] and (args[1:] == ["process"] or one_file):
        from gitmem.git.crypt_filter import FilterCommand, run_filter

        commands: dict[str, FilterCommand] = {c: c for c in ("process", "smudge", "clean", "textconv")}
        return run_filter(commands[args[1]], args[2] if one_file else None, sys.stdin.buffer, sys.stdout.buffer)
    return None


_status = _fast_path(sys.argv[1:])
if _status is not None:
    sys.exit(_status)

from gitmem.cli import main  # noqa: E402  after the fast paths, which never load it

main(prog_name="gitmem")

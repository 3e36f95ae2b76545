"""``python -m gitmem``: the same as the ``gitmem`` command.

Git's push hooks run ``python -P -m gitmem hook pre-receive|post-receive`` once per push each; that
command goes to :mod:`gitmem.hooks.push` without loading the command-line framework (which does
nothing a push hook needs: the hooks read their settings themselves).
"""

import sys

if len(sys.argv) == 3 and sys.argv[1] == "hook" and sys.argv[2] in ("pre-receive", "post-receive"):
    from gitmem.hooks import push

    sys.exit(push.run(push.PUSH_HOOKS[push.PUSH_HOOKS.index(sys.argv[2])]))

from gitmem.cli import main

main(prog_name="gitmem")

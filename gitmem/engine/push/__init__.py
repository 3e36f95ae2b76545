"""What Git's push hooks run: :mod:`.receive` (the hooks' engine), :mod:`.check` (pre-receive's checks)
and :mod:`.notes` (the push record post-receive writes).
"""

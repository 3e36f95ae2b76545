"""The names of the settings' environment, shared by the settings object and its hand-off to hooks
(which must not load the settings object: it costs a hook more than its work)."""

PREFIX = "GITMEM_"
CHECKED = PREFIX + "CHECKED"
PER_PUSH = frozenset({"USER_ID", "ACCESS", "STORE_ID", "PYTHON"})  # set by the server for each push
NOT_DIGESTED = PER_PUSH | {"CHECKED"}  # nor checked: read as they are

"""The memory section of a task's context: its stores, their folders, access, instructions and notes,
as short markdown (:meth:`gitmem.agents.tasks.tasks.Tasks.memory_view` gathers what it shows).
"""

from __future__ import annotations

from collections.abc import Sequence

from gitmem.agents.tasks.values import StoreView, Task


def section_field(label: str, text: str) -> list[str]:
    """``- Label: text`` for one line; a quote inside the list item for several."""
    lines = text.strip().splitlines()
    if len(lines) == 1:
        return [f"- {label}: {lines[0]}"]
    return [f"- {label}:", *(f"  > {line}".rstrip() for line in lines)]


def render_context(task: Task, views: Sequence[StoreView]) -> str:
    """The ``## Memory`` section for a task's context: each store's folder, access, description,
    instructions and note paths; an empty store asks for its first note instead of listing."""
    count = len(views)
    lines = [
        "## Memory",
        "",
        f"You have {count} memory store{'s' if count != 1 else ''}, each a folder of notes under"
        f" `{task.memory_root}` that lasts from task to task. Before you start, read the notes that"
        " bear on your work. As you work, write down what the next task should know (decisions, facts,"
        " preferences, unfinished work) as short markdown notes at paths that say what they hold, and"
        " keep them current rather than adding near-copies. Every change is kept as a version. You can"
        " change a read-write store; a read-only store can only be read.",
    ]
    for view in views:
        ts = view.store
        title = f"### {ts.name}" + (" (this worker's own memory)" if ts.own else "")
        access = view.access.replace("_", "-") + (" (archived)" if view.archived else "")
        lines += ["", title, "", f"- Folder: `{view.mount_path}`", f"- Access: {access}"]
        if ts.description.strip():
            lines += section_field("Description", ts.description)
        if ts.instructions.strip():
            lines += section_field("Instructions", ts.instructions)
        if view.review:
            lines.append(f"- Review: {view.review}")
        if not view.available:
            lines += ["", "This store is no longer available: its folder is empty and cannot be written."]
        elif view.total == 0 and view.access == "read_write":
            lines += [
                "",
                "This store is empty. Create its first note when you learn something worth keeping,"
                f" for example `{view.mount_path}notes.md`.",
            ]
        elif view.total == 0:
            lines += ["", "This store is empty and read-only: there is nothing in it to read yet."]
        else:
            lines += ["", f"Notes ({view.total}):"]
            lines += [f"- `{path.lstrip('/')}`" for path in view.paths]
            more = view.total - len(view.paths)
            if more > 0:
                lines.append(f"- ... and {more} more (list the folder to see them)")
    return "\n".join(lines) + "\n"

"""The memory tool for the official SDK's tool runner (``GitmemMemoryTool``), over :class:`MemoryToolHandler`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from anthropic.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from typing_extensions import override

from gitmem.agents.memory_tool.tool import MemoryToolHandler, ToolResult
from gitmem.model import Actor

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

CommandModel = (
    BetaMemoryTool20250818ViewCommand
    | BetaMemoryTool20250818CreateCommand
    | BetaMemoryTool20250818StrReplaceCommand
    | BetaMemoryTool20250818InsertCommand
    | BetaMemoryTool20250818DeleteCommand
    | BetaMemoryTool20250818RenameCommand
)


class GitmemMemoryTool(BetaAbstractMemoryTool):
    """The memory tool for the SDK's tool runner, backed by a gitmem store.

    ``client.beta.messages.tool_runner(..., tools=[GitmemMemoryTool(store, actor)])``: results come back
    as text; refusals raise the SDK's ``ToolError`` so the runner marks them ``is_error``.
    """

    def __init__(
        self,
        store: MemoryStore,
        actor: Actor | None = None,
        *,
        read_only: bool = False,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.handler = MemoryToolHandler(store, actor, read_only=read_only)

    @override
    def call(self, input: object) -> str:
        # The raw input goes straight to the handler, which checks it; the base class would build the
        # command model unchecked and fail on a malformed one with an exception instead of an answer.
        if not isinstance(input, Mapping):
            raise ToolError("The memory tool input must be an object with a `command` field.")
        return self._answer(self.handler.execute(input))

    def _run_model(self, command: CommandModel) -> str:
        return self._answer(self.handler.execute(command.model_dump(exclude_none=True)))

    @staticmethod
    def _answer(result: ToolResult) -> str:
        if result.is_error:
            raise ToolError(result.content)
        return result.content

    @override
    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run_model(command)

    @override
    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run_model(command)

    @override
    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run_model(command)

    @override
    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run_model(command)

    @override
    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run_model(command)

    @override
    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run_model(command)

    @override
    def clear_all_memory(self) -> str:
        return self._answer(self.handler.clear_all())

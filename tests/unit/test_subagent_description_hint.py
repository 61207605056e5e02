"""A subagent's description: where it comes from, and the error that points there."""

from __future__ import annotations

import pytest

from agentmesh import Context, Task, UsageError, subagent


class TestSubagentDescription:
    def test_description_keyword_says_where_the_description_comes_from(self) -> None:
        """@subagent(description=...) is refused with a message naming the docstring."""
        with pytest.raises(UsageError, match=r"'description'.*docstring.*as_tool\(description="):

            @subagent(name="docs", description="Search the docs.")  # type: ignore[call-arg]
            async def docs(task: Task, ctx: Context) -> str:
                return task.query

    def test_the_docstring_is_the_description_a_lead_sees(self) -> None:
        """The function's docstring becomes the description of the subagent's tool."""

        @subagent(name="docs")
        async def docs(task: Task, ctx: Context) -> str:
            """Search the Python documentation."""
            return task.query

        assert docs.as_tool().description == "Search the Python documentation."

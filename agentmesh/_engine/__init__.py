"""The task engine: what runs one task of a subagent below the `Context` its body sees.

Attempts under a retry policy (`_attempts`), the tool path (`_tool_call`), model turns
(`_model_calls`) and what they used (`_usage`), policy rulings (`_rulings`), questions
for a person (`_human`), partial results (`_partials`), a task's events (`_events`), the
ledger of side effects (`_ledger`) and a task's checkpoints (`_task_checkpoints`), all
driven by one `TaskEngine` per task (`_task`). The only private package other packages may import;
it imports nothing of `agentmesh.context`, the subagents or the coordinator above it.
"""

"""A research agent built on agentmesh: offline by default, over real local text.

    python -m examples.research_agent "How do asyncio tasks handle cancellation and timeouts?"

One run plans the question into subtopics (`planner`), dispatches one search subagent
per subtopic and source through a `Coordinator` (`research`, `agents`), keeps the
relevant passages (`analysis`), and writes a report with citations and coverage
(`synthesis`, `rendering`). `--inject SOURCE=KIND[@P]` makes a source fail on purpose
(`faults`) to watch the framework route the failure. Every run is checkpointed, and
`--resume RUN_ID` reruns it from its checkpoints (`resume`, `agents`). See
docs/research-agent.md.
"""

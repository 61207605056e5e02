"""`python -m agentmesh.mcp serve package.module:subagents [--http HOST:PORT]`."""

from agentmesh.mcp._cli import main

raise SystemExit(main())

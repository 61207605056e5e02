"""`python -m agentmesh.a2a serve package.module:agents [--host H] [--port P] [--token T]`."""

from agentmesh.a2a._server_cli import main

raise SystemExit(main())

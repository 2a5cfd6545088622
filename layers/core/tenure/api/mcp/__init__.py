"""The MCP endpoint: the lease tools over the official `mcp` SDK, one request per
invocation. Nothing here imports the SDK at module load: see server.py."""

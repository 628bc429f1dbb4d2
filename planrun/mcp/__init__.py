"""MCP both ways: planrun as a client of MCP servers, and `planrun mcp` as a server."""

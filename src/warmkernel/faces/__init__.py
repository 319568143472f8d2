"""The faces over the session: MCP handlers and the stdio server, Streamable HTTP, the console page."""

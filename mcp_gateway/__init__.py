"""mcp-gateway: one MCP server, six meta-tools, every API behind them."""

__version__ = "0.1.0"

"""A process that reads MCP requests on stdin and never answers (for handshake timeouts)."""

import sys

print("silent: waiting forever", file=sys.stderr, flush=True)
for _line in sys.stdin:
    pass

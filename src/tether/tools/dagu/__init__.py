"""Dagu's MCP surface on Tether: the `dagu_execute` tool (inputs, actions, wait, output and
errors in Dagu's shape), the run detail model, `dagu://` resources and `dagu_read`."""

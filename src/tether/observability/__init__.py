"""Observability: Prometheus metrics, OpenTelemetry traces, structured logs.

A leaf beside storage: it imports no other tether package. The runtime and the app call its
small recording functions; each is a no-op (one flag test) while its signal is switched off.
"""

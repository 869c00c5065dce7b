"""Step protocols (Realm's workflow YAML) on the durable runtime: one generic workflow per
protocol, each run an ordinary execution."""

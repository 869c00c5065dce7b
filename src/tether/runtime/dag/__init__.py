"""DAG specs (Dagu's format, parsed by `tether.specs.dag`) on the durable runtime: one generic
workflow per DAG, each run an ordinary execution whose steps are durable calls. Internal, like
the rest of `tether.runtime`: users reach it through `tether.App` (`action`, `dag`,
`load_dags`)."""

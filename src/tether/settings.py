"""Settings read from the environment (TETHER_*), overridable by CLI flags."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from tether.runtime.worker import WorkerSettings


class Settings(BaseModel):
    """Process settings. Every field has an environment variable TETHER_<FIELD>."""

    database_url: str | None = Field(None, description="PostgreSQL URL; unset: embedded server")
    data_dir: Path = Field(Path(".tether"), description="embedded PostgreSQL lives here")
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = Field(16, description="runs executed concurrently per worker process")
    lease_s: float = Field(30.0, description="worker lease; an expired lease is reclaimed")
    poll_s: float = Field(1.0, description="claim polling fallback when no notification comes")
    shutdown_grace_s: float = 10.0
    max_recovery_attempts: int = Field(
        10, ge=1, description="a run whose worker is lost this often in a row ends failed"
    )
    janitor_interval_s: float = 60.0
    pool_size: int = 20
    max_payload_bytes: int = 256 * 1024
    mcp_path: str = Field("/mcp", description="where the MCP endpoint is served")
    poll_interval_ms: int = Field(5000, ge=1, description="pollIntervalMs advertised on tasks")
    sync_limit_s: float = Field(60.0, description="a workflow tool called without tasks waits")
    start_wait_s: float = Field(0.0, description="start_<wf> without tasks waits this long")
    state_key: str | None = Field(None, description="HMAC key for MRTR requestState")
    allowed_hosts: str = Field("", description="comma-separated Host/Origin names besides loopback")
    allowed_origins: str = Field("", description="comma-separated exact Origins allowed")
    max_body_bytes: int = 4 * 1024 * 1024
    keep_alive_s: int = Field(75, description="idle HTTP keep-alive, longer than clients'")
    access_log: bool = Field(False, description="uvicorn's per-request access log")
    api_tokens: str = Field("", description="name:role:sha256hex,… (tether tokens new)")
    allow_unauthenticated: bool = Field(
        False, description="serve mutations without tokens on a non-loopback address"
    )
    rate_limit: str = Field(
        "", description="per-caller request rate, e.g. '20/s burst 40'; empty: unlimited"
    )
    max_streams_per_token: int = Field(
        32, ge=1, description="open SSE streams per caller (token, else remote address)"
    )
    audit_retention_days: float = Field(
        90.0, gt=0, description="audit rows older than this are deleted by the janitor"
    )

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: object) -> Settings:
        env = dict(os.environ if env is None else env)
        values: dict[str, object] = {}
        for name in cls.model_fields:
            raw = env.get(f"TETHER_{name.upper()}")
            if raw not in (None, ""):
                values[name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)

    def worker_settings(self) -> WorkerSettings:
        return WorkerSettings(
            concurrency=self.workers,
            lease_s=self.lease_s,
            poll_s=self.poll_s,
            shutdown_grace_s=self.shutdown_grace_s,
            max_recovery_attempts=self.max_recovery_attempts,
        )

"""The configuration's sections: one frozen pydantic model per component, and `Config`.

Defaults are SPEC §4's; cross-key checks raise `KeyProblem` so the message names the
key at fault.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from collector.common.errors import ConfigError
from collector.config.checks import (
    KeyProblem,
    check_destinations,
    check_receiver_endpoint,
    check_redis_url,
    url_problem,
    without_password,
)
from collector.config.judge import JudgeConfig
from collector.config.labels import LabelsConfig
from collector.config.redis_url import SCHEMES
from collector.config.sessions import SessionsConfig
from collector.config.sinks import SinksConfig

_MODEL = ConfigDict(extra="forbid", frozen=True)
REDIS_SCHEMES = tuple(f"{scheme}://" for scheme in SCHEMES if scheme.startswith("redis"))


class ReceiverConfig(BaseModel):
    """OTLP receivers: listen addresses, auth and body limits.

    Example:
        >>> ReceiverConfig().http_endpoint
        '127.0.0.1:4318'
        >>> ReceiverConfig(auth_token="s3cret").token()
        's3cret'
    """

    model_config = _MODEL
    grpc_endpoint: str = "127.0.0.1:4317"
    http_endpoint: str = "127.0.0.1:4318"
    auth_token: SecretStr = SecretStr("")
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    retry_after_s: float = Field(default=5.0, gt=0)
    tls_cert_file: str = ""              # PEM; with tls_key_file, both listeners serve TLS
    tls_key_file: str = ""
    # Per listener: open connections at most (also capped by the process's file limit), and
    # how long a connection may take to send its request headers, its body, or stay idle.
    max_connections: int = Field(default=1000, gt=0)
    header_timeout_s: float = Field(default=10.0, gt=0)
    body_timeout_s: float = Field(default=60.0, gt=0)
    keepalive_timeout_s: float = Field(default=60.0, gt=0)
    # Each accepted request also written here as a file `tracescore inspect` / `score` read ("": not saved),
    # until this process wrote save_max_bytes (`collector.receive.save`).
    save_dir: str = ""
    save_max_bytes: int = Field(default=1 << 30, gt=0)

    @model_validator(mode="after")
    def _endpoints(self) -> ReceiverConfig:
        check_receiver_endpoint(self.grpc_endpoint, "grpc_endpoint")
        check_receiver_endpoint(self.http_endpoint, "http_endpoint")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            missing = "tls_key_file" if self.tls_cert_file else "tls_cert_file"
            raise KeyProblem(f"receiver.{missing}", "tls_cert_file and tls_key_file must be given together")
        return self

    def tls(self) -> tuple[bytes, bytes] | None:
        """The (certificate chain, private key) PEM bytes when TLS is configured, else None.

        Example:
            >>> ReceiverConfig().tls() is None
            True
        """
        if not self.tls_cert_file:
            return None
        return Path(self.tls_cert_file).read_bytes(), Path(self.tls_key_file).read_bytes()

    def token(self) -> str | None:
        """The bearer token in force (``env:NAME`` read from the environment), or None.

        Raises:
            ConfigError: ``env:NAME`` names a variable that is not set (a daemon meant to
                require a token must not start open because a secret was not mounted). A
                variable set to "" disables auth, as ``auth_token = ""`` does.

        Example:
            >>> ReceiverConfig(auth_token="s3cret").token()
            's3cret'
            >>> ReceiverConfig().token() is None
            True
        """
        raw = self.auth_token.get_secret_value()
        if raw.startswith("env:"):
            name = raw[4:]
            value = os.environ.get(name)
            if value is None:
                raise ConfigError(f"invalid configuration: receiver.auth_token: environment "
                                  f"variable {name} is not set")
            raw = value
        return raw or None


class AssemblyConfig(BaseModel):
    """Trace assembly: how long to wait for late spans and how much to buffer.

    Example:
        >>> AssemblyConfig().decision_wait
        5.0
    """

    model_config = _MODEL
    decision_wait: float = Field(default=5.0, ge=0)
    rootless_wait: float = Field(default=30.0, ge=0)
    max_traces: int = Field(default=100_000, gt=0)
    max_spans_per_trace: int = Field(default=10_000, gt=0)
    max_trace_age: float = Field(default=600.0, gt=0)
    # Request bodies buffered on disk at most (SQLite store; 0: no cap): beyond it receivers
    # answer 429, well before the disk fills.
    max_buffer_bytes: int = Field(default=2 * 1024**3, ge=0)
    # Processes reading decided traces with the adapters (0: the daemon's own thread).
    decide_processes: int = Field(default=0, ge=0, le=64)


class QueueConfig(BaseModel):
    """The job queue and its store: ``sqlite:///PATH`` (embedded) or Redis (SPEC §9: one
    server, Sentinel or Cluster; ``wait_replicas``: replicas that must hold a request's writes
    before a receiver answers success).

    Example:
        >>> QueueConfig().kind
        'sqlite'
        >>> QueueConfig(url="redis+sentinel://:pw@h1,h2/primary/0", wait_replicas=1).kind
        'redis'
        >>> QueueConfig(url="sqlite:////var/lib/ts/q.db").sqlite_path
        '/var/lib/ts/q.db'
    """

    model_config = _MODEL
    url: str = "sqlite:///.tracescore/queue.db"
    # A job's lease: renewed by its worker every third of it while the job runs, so a dead
    # worker's jobs are taken over this long after its last renewal.
    visibility_timeout_s: float = Field(default=20.0, gt=0)
    max_attempts: int = Field(default=5, gt=0)
    max_pending_jobs: int = Field(default=100_000, gt=0)
    retention_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    key_prefix: str = Field(default="tracescore:", min_length=1)  # redis: keys of this deployment
    wait_replicas: int = Field(default=0, ge=0)  # redis: replicas that acknowledge (WAIT) before success
    wait_timeout_ms: int = Field(default=1000, gt=0)  # redis: how long WAIT waits; then 503 + Retry-After
    partitions: int = Field(default=1, ge=1, le=64)  # redis: key sets (hash slots) the work is spread over

    @model_validator(mode="after")
    def _scheme(self) -> QueueConfig:
        if not self.url.startswith(("sqlite:///", *REDIS_SCHEMES)):
            raise KeyProblem("queue.url", "must start with sqlite:///, redis://, rediss://, redis+sentinel://, "
                                          f"rediss+sentinel://, redis+cluster:// or rediss+cluster://, got {self.url!r}")
        if self.url.startswith("redis"):
            check_redis_url(self.url)
        elif self.wait_replicas:
            raise KeyProblem("queue.wait_replicas", "needs a Redis queue.url (a SQLite file has no replicas)")
        elif self.partitions > 1:
            raise KeyProblem("queue.partitions", "needs a Redis queue.url (a SQLite file is one partition)")
        return self

    @property
    def display_url(self) -> str:
        """The URL with any password replaced by ``***`` (for logs and ``check``).

        Example:
            >>> QueueConfig(url="redis://:s3cret@redis:6379/0").display_url
            'redis://:***@redis:6379/0'
        """
        return without_password(self.url)

    @property
    def kind(self) -> Literal["sqlite", "redis"]:
        """The backend named by the URL scheme.

        Example:
            >>> QueueConfig(url="sqlite:///q.db").kind
            'sqlite'
        """
        return "sqlite" if self.url.startswith("sqlite:") else "redis"

    @property
    def sqlite_path(self) -> str:
        """The SQLite file path of a ``sqlite:///`` URL.

        Example:
            >>> QueueConfig(url="sqlite:///data/q.db").sqlite_path
            'data/q.db'
        """
        return self.url[len("sqlite:///") :]


class WorkersConfig(BaseModel):
    """Score workers: jobs and judge calls in flight, and a worker's own HTTP listener.

    Example:
        >>> WorkersConfig().concurrency, WorkersConfig().http_endpoint
        (64, '127.0.0.1:9464')
    """

    model_config = _MODEL
    concurrency: int = Field(default=64, gt=0)
    judge_concurrency: int = Field(default=32, gt=0)
    # Judge requests (and tokens) per minute per model, shared by every process of the
    # deployment (0: no limit); a model listed in *_by_model gets its own limit (0 there exempts it).
    judge_rpm: int = Field(default=0, ge=0)
    judge_rpm_by_model: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    judge_tpm: int = Field(default=0, ge=0)
    judge_tpm_by_model: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    job_timeout_s: float = Field(default=240.0, gt=0)  # a run taking longer is retried (then failed)
    drain_timeout_s: float = Field(default=30.0, ge=0)  # SIGTERM: in-flight jobs finish this long
    # Quick sync scorer steps run on the event loop ("adaptive", scorers._sync_calls), or always in a thread.
    sync_steps: Literal["adaptive", "thread"] = "adaptive"
    http_endpoint: str = "127.0.0.1:9464"  # --role worker's only listener: metrics, health, status, no OTLP


class ExportConfig(BaseModel):
    """Where scores (and forwarded spans) go.

    Example:
        >>> ExportConfig(endpoint="http://backend:4318", protocol="http/protobuf").protocol
        'http/protobuf'
    """

    model_config = _MODEL
    endpoint: str = ""
    protocol: Literal["grpc", "http/protobuf"] = "grpc"
    headers: dict[str, SecretStr] = Field(default_factory=dict)  # often credentials: never printed
    forward_spans: bool = True
    max_attribute_chars: int = Field(default=4096, gt=0)
    timeout_s: float = Field(default=10.0, gt=0)
    max_backoff_s: float = Field(default=30.0, gt=0)
    max_batch: int = Field(default=256, gt=0)
    batch_delay_s: float = Field(default=0.01, ge=0, le=5)  # a score waits this long for others to share its call
    score_logs: bool = False
    score_metrics: bool = False
    metrics_interval_s: float = Field(default=60.0, gt=0)
    max_forward_backlog_bytes: int = Field(default=1 << 30, gt=0)  # received, not yet forwarded; over it: 429
    span_time: Literal["anchored", "actual"] = "anchored"  # evaluation spans: at the scored span's end, or when scored

    @field_validator("endpoint")
    @classmethod
    def _endpoint_shape(cls, endpoint: str) -> str:
        """An OTLP endpoint: ``http(s)://HOST[:PORT][/path]``, ``HOST:PORT``, or "" (none)."""
        problem = url_problem(endpoint, bare=True) if endpoint else None
        if problem is not None:
            raise ValueError(problem)
        return endpoint

    def header_values(self) -> dict[str, str]:
        """The export headers in clear, for the exporters (never log them).

        Example:
            >>> cfg = ExportConfig(headers={"api-key": "s3cret"})
            >>> (cfg.header_values(), "s3cret" in repr(cfg))
            ({'api-key': 's3cret'}, False)
        """
        return {k: v.get_secret_value() for k, v in self.headers.items()}

    def destination(self) -> str:
        """The endpoint and protocol as the log names them (a password in the URL masked).

        Example:
            >>> ExportConfig(endpoint="https://u:pw@backend:4318", protocol="http/protobuf").destination()
            'https://u:***@backend:4318 (http/protobuf)'
        """
        return f"{without_password(self.endpoint)} ({self.protocol})"


class FilterConfig(BaseModel):
    """Which runs a scorer sees; every given field must match.

    Example:
        >>> FilterConfig(service="support-bot").service
        'support-bot'
    """

    model_config = _MODEL
    service: str | None = None
    agent: str | None = None
    span_name: str | None = None
    attributes: dict[str, str | int | float | bool] = Field(default_factory=dict)


class ScorerConfig(BaseModel):
    """One registered scorer.

    ``labels`` (label -> lowest score that earns it) or ``pass_threshold`` ("pass" at or
    above it, else "fail") give its scores a ``gen_ai.evaluation.score.label``.

    Example:
        >>> ScorerConfig(ref="my_scorers:quality", sampling=0.5).sampling
        0.5
        >>> ScorerConfig(ref="m:q", labels={"good": 0.8, "poor": 0.0}).label_for(0.9)
        'good'
        >>> ScorerConfig(ref="m:q", pass_threshold=0.5).label_for(0.2)
        'fail'
    """

    model_config = _MODEL
    ref: str
    sampling: float = Field(default=1.0, ge=0, le=1)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    labels: dict[str, float] = Field(default_factory=dict)
    pass_threshold: float | None = None
    args: dict[str, Any] = Field(default_factory=dict)  # keyword arguments when ref names a factory
    few_shot: int = Field(default=0, ge=0)  # labelled examples after the judge's instructions (SPEC §11)
    instructions_file: str | None = None  # a TOML file whose `instructions` replace the judge's (`align --out`)

    def label_for(self, score: float) -> str | None:
        """The label of a score under ``labels`` or ``pass_threshold`` (None without either).

        Example:
            >>> ScorerConfig(ref="m:q", labels={"fair": 0.5}).label_for(0.1) is None
            True
        """
        if self.labels:
            earned = [(low, label) for label, low in self.labels.items() if score >= low]
            return max(earned)[1] if earned else None
        if self.pass_threshold is not None:
            return "pass" if score >= self.pass_threshold else "fail"
        return None

    @field_validator("ref")
    @classmethod
    def _ref_shape(cls, ref: str) -> str:
        module, _, attr = ref.rpartition(":")
        if not module or not attr:
            raise ValueError(f"must be module:attribute or path/file.py:attribute, got {ref!r}")
        return ref

    @model_validator(mode="after")
    def _label_rules(self) -> ScorerConfig:
        if self.labels and self.pass_threshold is not None:
            raise ValueError("give labels or pass_threshold, not both")
        return self


class Config(BaseModel):
    """The whole daemon configuration.

    Example:
        >>> Config().assembly.max_traces
        100000
    """

    model_config = _MODEL
    receiver: ReceiverConfig = Field(default_factory=ReceiverConfig)
    assembly: AssemblyConfig = Field(default_factory=AssemblyConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    queue: QueueConfig = Field(default_factory=QueueConfig)
    workers: WorkersConfig = Field(default_factory=WorkersConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)
    scorers: list[ScorerConfig] = Field(default_factory=list)
    sinks: SinksConfig = Field(default_factory=SinksConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    labels: LabelsConfig = Field(default_factory=LabelsConfig)

    @model_validator(mode="after")
    def _across_sections(self) -> Config:
        check_receiver_endpoint(self.workers.http_endpoint, "http_endpoint", section="workers")
        # Export or a sink on our own listener would feed the daemon its own output for ever.
        check_destinations(self.destinations(), [self.receiver.grpc_endpoint, self.receiver.http_endpoint])
        off = [name for name in self.labels.sources if not getattr(self.sinks, name).enabled]
        if off:  # labels are read where the scores are written: the sink's URL and credentials
            raise KeyProblem("labels.from", f"names sinks that are not configured: {', '.join(off)}"
                             f" (set [sinks.{off[0]}] first)")
        return self

    def destinations(self) -> dict[str, str]:
        """Where the daemon sends data, by dotted key: the export endpoint and every sink's URL.

        Example:
            >>> Config.model_validate({"export": {"endpoint": "http://backend:4317"},
            ...                        "sinks": {"phoenix": {"endpoint": "http://phoenix:6006"}}}).destinations()
            {'export.endpoint': 'http://backend:4317', 'sinks.phoenix.endpoint': 'http://phoenix:6006'}
        """
        export = {"export.endpoint": self.export.endpoint} if self.export.endpoint else {}
        return {**export, **self.sinks.urls()}

"""``tracescore check``: ask the trace backends what they think of the configuration, where they can be asked.

Validation alone passed a configuration whose every forwarded span the backend then held
(issue 42: MLflow's OTLP endpoint names its experiment in the ``x-mlflow-experiment-id``
header, and a fresh server has only experiment 0). So `backend_findings` asks the servers
the configuration names, with its own credentials:

* the export endpoint with an ``x-mlflow-experiment-id`` header: does the experiment exist on
  that MLflow server (``GET /api/2.0/mlflow/experiments/get``)? Missing, or an id MLflow
  refuses: a problem with the fix; deleted: a warning (MLflow stores the spans, its UI hides them);
* an OTLP/HTTP export endpoint without that header that is an MLflow server: a problem (MLflow
  refuses every span without it);
* ``[sinks.mlflow]`` and ``[sinks.phoenix]``: does the server answer its API with the
  configured token or key (refused: a problem);
* an ``x-project-name`` header (Phoenix's): does the project exist (a note when not: Phoenix
  creates a project when its first span arrives).

A server that cannot be reached (or answers 5xx) is a warning, not a failure: the daemon keeps
what it receives and retries until it answers. Every question runs at once, each on its own
thread, and `backend_findings` waits ``timeout_s`` at most in all (a question still unanswered
then is a warning). Only the standard library's HTTP client is used (``check`` stays light).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from collector.common.errors import ConfigError
from collector.config import Config, http_url, secret_value, without_password
from collector.export.send.answers import (
    Verdict,
    backend_message,
    classify_http,
    describe_error,
    no_route,
)

MLFLOW_EXPERIMENT_HEADER = "x-mlflow-experiment-id"
PHOENIX_PROJECT_HEADER = "x-project-name"


@dataclass(frozen=True)
class Finding:
    """What a backend said about the configuration: a ``problem`` (check fails), a ``warning``
    or a ``note`` (check passes), or ``ok`` (a line of the summary)."""

    level: str
    text: str


@dataclass(frozen=True)
class Reply:
    """A server's reply: its HTTP status (0: no answer) and body (or why there was none)."""

    status: int
    text: str

    @property
    def reached(self) -> bool:
        """Whether the server answered, and not with a server error.

        Example:
            >>> Reply(404, "").reached, Reply(0, "refused").reached, Reply(503, "").reached
            (True, False, False)
        """
        return 0 < self.status < 500

    def json(self) -> dict[str, object]:
        """The body as a JSON object ({} when it is not one)."""
        try:
            found = json.loads(self.text)
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}


def get(url: str, headers: Mapping[str, str], timeout_s: float) -> Reply:
    """``GET url`` with ``headers``; never raises.

    Example:
        >>> get("http://127.0.0.1:1/", {}, 1.0).status
        0
    """
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:  # noqa: S310 (http(s) only)
            return Reply(resp.status, resp.read(65536).decode("utf-8", "replace"))
    except urllib.error.HTTPError as err:
        return Reply(err.code, err.read(65536).decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = err.reason if isinstance(err, urllib.error.URLError) else err
        return Reply(0, describe_error(reason) if isinstance(reason, BaseException) else str(reason))


Fetch = Callable[[str, Mapping[str, str]], Reply]


def unreachable(what: str, url: str, reply: Reply) -> Finding:
    """The warning for a server that did not answer (or failed): the daemon retries."""
    why = reply.text if reply.status == 0 else classify_http(reply.status, reply.text).cause
    return Finding("warning", f"could not verify {what} on {without_password(url)} ({why}): the daemon keeps what "
                              "it receives and retries until the server answers")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name), None)


def _base(endpoint: str) -> str:
    """The server's base URL under an OTLP endpoint (its signal path, if any, cut off)."""
    return http_url(endpoint, "")


def _mlflow_api(reply: Reply) -> bool:
    """Whether a reply to ``experiments/get`` comes from MLflow's API (an experiment, or MLflow's JSON error)."""
    body = reply.json()
    return "experiment" in body or "error_code" in body


def mlflow_experiment(config: Config, fetch: Fetch) -> list[Finding]:
    """The export endpoint's MLflow experiment (named by its header): there, deleted, or missing.

    Example:
        >>> from collector.config import config_from_dict
        >>> def fetch(url, headers):
        ...     return Reply(404, '{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "No Experiment with id=1 exists"}')
        >>> cfg = config_from_dict({"export": {"endpoint": "http://127.0.0.1:5000", "protocol": "http/protobuf",
        ...                         "headers": {"x-mlflow-experiment-id": "1"}}}, env={})
        >>> (found,) = mlflow_experiment(cfg, fetch)
        >>> found.level, found.text.split(";")[0]
        ('problem', 'export.headers.x-mlflow-experiment-id: experiment 1 does not exist on http://127.0.0.1:5000 (No Experiment with id=1 exists)')
    """
    export = config.export
    headers = export.header_values()
    experiment = _header(headers, MLFLOW_EXPERIMENT_HEADER)
    if not export.endpoint or (experiment is None and export.protocol != "http/protobuf"):
        return []
    base = _base(export.endpoint)
    url = f"{base}/api/2.0/mlflow/experiments/get?" + urllib.parse.urlencode({"experiment_id": experiment or "0"})
    reply = fetch(url, headers)
    shown = without_password(base)
    if experiment is None:  # an MLflow server without the header refuses every span (HTTP 422)
        if not _mlflow_api(reply):
            return []
        return [Finding("problem", f"export.headers: {shown} is an MLflow tracking server, whose OTLP endpoint "
                                   f"needs the header {MLFLOW_EXPERIMENT_HEADER} (it refuses spans without it): add "
                                   f'headers = {{ "{MLFLOW_EXPERIMENT_HEADER}" = "0" }} (0 is MLflow\'s Default '
                                   "experiment; or the id of yours)")]
    key = f"export.headers.{MLFLOW_EXPERIMENT_HEADER}"
    if not reply.reached:
        return [unreachable(f"MLflow experiment {experiment}", base, reply)]
    answer = classify_http(reply.status, reply.text)
    details = reply.json().get("experiment")
    if answer.verdict is Verdict.SENT and isinstance(details, dict):
        name = details.get("name")
        if details.get("lifecycle_stage") == "deleted":
            return [Finding("warning", f"{key}: experiment {experiment} ({name}) is deleted on {shown}: MLflow stores "
                                       "the spans sent there but does not show them; restore it (mlflow experiments "
                                       f"restore --experiment-id {experiment}) or name another")]
        return [Finding("ok", f"MLflow experiment {experiment} ({name}) on {shown}")]
    if reply.status == 404 and _mlflow_api(reply):
        return [Finding("problem", f"{key}: experiment {experiment} does not exist on {shown} ({answer.message}); "
                                   f"create it (mlflow experiments create --experiment-name NAME, or POST "
                                   f"{shown}/api/2.0/mlflow/experiments/create) and use its id, or use 0 (MLflow's "
                                   "Default experiment)")]
    if answer.verdict is Verdict.HOLD and reply.status != 404:  # credentials, a redirect
        return [Finding("problem", f"export.headers: {shown} refused to show experiment {experiment} ({answer.cause}); "
                                   f"{answer.fix}")]
    if _mlflow_api(reply):  # MLflow refused the id itself ("must be a valid integer")
        return [Finding("problem", f"{key}: MLflow at {shown} refuses experiment {experiment!r} ({answer.message})")]
    return [Finding("warning", f"{key}: {shown} does not answer MLflow's API ({answer.cause}): is export.endpoint "
                               "an MLflow tracking server?")]


def mlflow_sink(config: Config, fetch: Fetch) -> list[Finding]:
    """``[sinks.mlflow]``: does the tracking server answer its API with the configured token."""
    sink = config.sinks.mlflow
    if not sink.enabled:
        return []
    token = secret_value(sink.token, "sinks.mlflow.token")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    reply = fetch(f"{sink.url()}/api/2.0/mlflow/experiments/get?experiment_id=0", headers)
    return _sink_answer("sinks.mlflow", "MLflow", sink.url(), reply, _mlflow_api(reply), "sinks.mlflow.token")


def phoenix(config: Config, fetch: Fetch) -> list[Finding]:
    """``[sinks.phoenix]``: does Phoenix answer its REST API with the configured key; and the project
    an ``x-project-name`` export header names, when the export endpoint is that Phoenix (or the
    sink is off): there, or created with the first span."""
    sink, export = config.sinks.phoenix, config.export
    found: list[Finding] = []
    key = secret_value(sink.api_key, "sinks.phoenix.api_key") if sink.enabled else ""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if sink.enabled:
        reply = fetch(f"{sink.url()}/v1/projects?limit=1", headers)
        ours = reply.status == 200 and "data" in reply.json()
        found += _sink_answer("sinks.phoenix", "Phoenix", sink.url(), reply, ours, "sinks.phoenix.api_key")
    project = _header(export.header_values(), PHOENIX_PROJECT_HEADER)
    if project is None or not export.endpoint or export.protocol != "http/protobuf":
        return found
    base = _base(export.endpoint)
    if not sink.enabled or base.rstrip("/") != sink.url():
        headers = {k: v for k, v in export.header_values().items() if k.lower() == "authorization"}
    reply = fetch(f"{base}/v1/projects/{urllib.parse.quote(project, safe='')}", headers)
    shown = without_password(base)
    if not reply.reached:
        return [*found, unreachable(f"Phoenix project {project!r}", base, reply)]
    if reply.status == 200:
        return [*found, Finding("ok", f"Phoenix project {project!r} on {shown}")]
    if reply.status == 404 and not no_route(404, reply.text):
        return [*found, Finding("note", f"export.headers.{PHOENIX_PROJECT_HEADER}: project {project!r} does not exist "
                                        f"yet on {shown} ({backend_message(reply.text)}): Phoenix creates it when the "
                                        "first span arrives")]
    return found


def _sink_answer(section: str, backend: str, url: str, reply: Reply, ours: bool, secret: str) -> list[Finding]:
    shown = without_password(url)
    if not reply.reached:
        return [unreachable(f"the {backend} server of [{section}]", url, reply)]
    answer = classify_http(reply.status, reply.text)
    if reply.status in (401, 403, 407):
        return [Finding("problem", f"{secret}: {backend} at {shown} refused the credentials ({answer.cause}); "
                                   f"every score would wait until they are fixed")]
    if ours:
        return [Finding("ok", f"{backend} at {shown} answers [{section}]")]
    return [Finding("warning", f"{section}: {shown} does not answer {backend}'s API ({answer.cause}): is it the "
                               f"{backend} server?")]


PROBES: tuple[Callable[[Config, Fetch], list[Finding]], ...] = (mlflow_experiment, mlflow_sink, phoenix)
"""The questions `backend_findings` asks."""


def backend_findings(config: Config, timeout_s: float = 5.0, fetch: Fetch | None = None) -> list[Finding]:
    """Ask every backend the configuration names (see the module docstring), at once, for
    ``timeout_s`` at most; the findings in `PROBES` order.

    Example:
        >>> from collector.config import config_from_dict
        >>> backend_findings(config_from_dict({}, env={}))
        []
    """
    def ask(url: str, headers: Mapping[str, str]) -> Reply:
        return get(url, headers, timeout_s)

    asking = fetch or ask
    answers: list[list[Finding] | None] = [None] * len(PROBES)

    def run(n: int, probe: Callable[[Config, Fetch], list[Finding]]) -> None:
        try:
            answers[n] = probe(config, asking)
        except ConfigError as err:  # a key's env:NAME variable is not set
            answers[n] = [Finding("problem", str(err).removeprefix("invalid configuration: "))]
        except Exception as err:  # a bug here must not fail the check of a valid configuration
            answers[n] = [Finding("warning", f"could not check {probe.__name__.replace('_', ' ')}: "
                                             f"{describe_error(err)}")]

    threads = [threading.Thread(target=run, args=(n, probe), daemon=True, name=f"check-{probe.__name__}")
               for n, probe in enumerate(PROBES)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    late = [PROBES[n].__name__.replace("_", " ") for n, found in enumerate(answers) if found is None]
    found = [finding for group in answers if group is not None for finding in group]
    if late:  # an address that resolves slowly, a server that accepts and never answers
        found.append(Finding("warning", f"no answer within {timeout_s:g} s while checking {', '.join(late)}: the "
                                        "daemon keeps what it receives and retries until the servers answer"))
    return found

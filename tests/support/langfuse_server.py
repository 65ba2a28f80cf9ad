"""A loopback stand-in for Langfuse's public scores API (Langfuse itself needs its own database
services and cannot run here).

``POST /api/public/scores`` checks basic auth (the project's public and secret key) and
validates each body with the request type the ``langfuse`` PyPI package ships for that
endpoint (``langfuse.api.CreateScoreRequest``, plus: no key the type does not know, an
``id`` given, exactly one of ``traceId``, ``sessionId`` and ``datasetRunId``, as Langfuse
answers 400 otherwise). Scores are stored as Langfuse stores them: one per (id, timestamp), a
repeated post of both is an update (the documented upsert). ``down`` makes the server
answer 503 (an outage); ``fail_next`` scripts failures. This is the network boundary fake
(STYLE: fakes only at boundaries).

Its read side, for ``tracescore score --from langfuse+URL``: OTLP spans posted to
``/api/public/otel/v1/traces`` become traces and observations as Langfuse makes them
(`langfuse_ingest`), read back with ``GET /api/public/projects``, ``GET /api/public/traces``
(``page``/``limit``/``fromTimestamp``/``toTimestamp``/``orderBy``, ``meta`` checked against the
SDK's ``MetaResponse``) and ``GET /api/public/v2/observations?traceId=`` (cursor paging, rows
checked against the SDK's ``ObservationsV2Response``). ``filters`` records the ``filter``
parameters received; ``reads`` counts read requests; ``garbage`` makes reads answer non-JSON.

Scores read back (`langfuse_scores`: ``GET /api/public/v3/scores``, and the deprecated
``GET /api/public/v2/scores``; ``v3_scores = False`` makes v3 answer 404, as a Langfuse before
3.179 does): the scores posted (source API) and those a test seeds with `add_score` (a person's
score: source ANNOTATION, an author, and an edit that moves ``updatedAt`` only, as Langfuse's UI
does; or API/EVAL ones). ``score_queries`` records each read's query; ``odd_rows`` are added, unchecked,
to the first v3 page (a row a newer or broken Langfuse might send).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from langfuse.api import CreateScoreRequest
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.observations.types import ObservationsV2Response
from langfuse.api.utils.pagination.types import MetaResponse
from langfuse_ingest import ingest, trace_row
from langfuse_scores import iso_ms, v2_answer, v3_answer


def known_keys() -> set[str]:
    """The JSON keys of ``CreateScoreRequest`` (its fields' wire names).

    Example:
        >>> {"traceId", "observationId", "name", "value", "id"} <= known_keys()
        True
    """
    keys = set()
    for name, info in CreateScoreRequest.model_fields.items():
        alias = next((getattr(m, "alias", None) for m in info.metadata if getattr(m, "alias", None)), None)
        keys.add(alias or info.alias or name)
    return keys


@dataclass
class LangfuseServer:
    """The scores endpoint on 127.0.0.1 (``await start()``; ``url`` is the sink's ``host``)."""

    public_key: str = "pk-lf-test"
    secret_key: str = "sk-lf-test"
    port: int = 0
    scores: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (id, timestamp) -> body
    posts: int = 0  # requests that reached validation
    refused: list[str] = field(default_factory=list)  # why requests were refused (400/401)
    down: bool = False
    fail_next: list[int] = field(default_factory=list)  # statuses to answer the next requests with
    observations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # trace id -> observations
    filters: list[str] = field(default_factory=list)
    reads: int = 0
    garbage: bool = False
    garbage_after: int | None = None  # reads after this many answer non-JSON
    stamps: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # score key -> createdAt, updatedAt
    v3_scores: bool = True
    score_queries: list[dict[str, str]] = field(default_factory=list)
    odd_rows: list[Any] = field(default_factory=list)
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> LangfuseServer:
        app = web.Application()
        app.router.add_post("/api/public/scores", self._create)
        app.router.add_post("/api/public/otel/v1/traces", self._ingest)
        app.router.add_get("/api/public/projects", self._projects)
        app.router.add_get("/api/public/traces", self._traces)
        app.router.add_get("/api/public/v2/observations", self._observations)
        app.router.add_get("/api/public/v3/scores", self._scores_v3)
        app.router.add_get("/api/public/v2/scores", self._scores_v2)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _authorized(self, header: str) -> bool:
        expected = base64.b64encode(f"{self.public_key}:{self.secret_key}".encode()).decode()
        return header == f"Basic {expected}"

    async def _create(self, request: web.Request) -> web.Response:
        if self.down:
            return web.json_response({"message": "down"}, status=503)
        if self.fail_next:
            return web.json_response({"message": "scripted failure"}, status=self.fail_next.pop(0))
        if not self._authorized(request.headers.get("Authorization", "")):
            self.refused.append("unauthorized")
            return web.json_response({"message": "Invalid credentials"}, status=401)
        body = await request.json()
        self.posts += 1
        problem = self._problem(body)
        if problem:
            self.refused.append(problem)
            return web.json_response({"message": problem}, status=400)
        key = (body["id"], body.get("timestamp", ""))
        self.scores[key] = body
        self._stamp(key)
        return web.json_response({"id": body["id"]})

    def _stamp(self, key: tuple[str, str], at: float | None = None) -> None:
        now = iso_ms(time.time() if at is None else at)
        self.stamps[key] = (self.stamps.get(key, (now, now))[0], now)

    def add_score(self, name: str, value: float | str, *, source: str = "ANNOTATION", data_type: str = "NUMERIC",
                  trace_id: str | None = None, observation_id: str | None = None, session_id: str | None = None,
                  comment: str | None = None, author: str | None = None, score_id: str | None = None,
                  timestamp: float | None = None, updated_at: float | None = None) -> str:
        """Seed a score as Langfuse keeps it (a person's in the UI by default); the same id and
        timestamp again is an edit: its value and comment change, ``updatedAt`` moves (``updated_at``,
        else now), the rest stays. Returns the score's id."""
        score_id = score_id or str(uuid.uuid4())
        given = [key[1] for key in self.scores if key[0] == score_id]
        stamp = given[0] if given and timestamp is None else iso_ms(time.time() if timestamp is None else timestamp)
        body = {"id": score_id, "name": name, "value": value, "dataType": data_type, "source": source,
                "timestamp": stamp, "traceId": trace_id, "observationId": observation_id, "sessionId": session_id,
                "comment": comment, "authorUserId": author}
        self.scores[(score_id, stamp)] = {k: v for k, v in body.items() if v is not None}
        self._stamp((score_id, stamp), updated_at)
        return score_id

    def stored_scores(self) -> list[dict[str, Any]]:
        """Every score as the read endpoints see it (with Langfuse's times)."""
        out = []
        for key, body in self.scores.items():
            created, updated = self.stamps.get(key, (iso_ms(0), iso_ms(0)))
            out.append({"timestamp": created, **body, "createdAt": created, "updatedAt": updated})
        return out

    def _problem(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return "body is not a JSON object"
        unknown = set(body) - known_keys()
        if unknown:
            return f"unknown keys {sorted(unknown)}"
        try:
            parsed = parse_obj_as(CreateScoreRequest, body)
        except Exception as err:  # pydantic's ValidationError: the body does not fit the type
            return f"invalid CreateScoreRequest: {err}"
        if not parsed.id:
            return "no id: the score cannot be upserted"
        targets = [key for key in ("traceId", "sessionId", "datasetRunId") if body.get(key)]
        if len(targets) != 1:
            return f"a score names exactly one of traceId, sessionId, datasetRunId (got {targets})"
        return None

    def by_observation(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Stored scores by (observation id, name)."""
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for body in self.scores.values():
            out.setdefault((body.get("observationId", ""), body["name"]), []).append(body)
        return out

    def by_session(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Stored session scores by (session id, name)."""
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for body in self.scores.values():
            if body.get("sessionId"):
                out.setdefault((body["sessionId"], body["name"]), []).append(body)
        return out

    async def _ingest(self, request: web.Request) -> web.Response:
        if not self._authorized(request.headers.get("Authorization", "")):
            return web.json_response({"message": "Invalid credentials"}, status=401)
        for obs in ingest(await request.read()):
            self.observations.setdefault(obs["traceId"], []).append(obs)
        return web.json_response({})

    def _refusal(self, request: web.Request) -> web.Response | None:
        """The answer of a read that fails (down, scripted, credentials, garbage), else None."""
        self.reads += 1
        if self.down:
            return web.json_response({"message": "down"}, status=503)
        if self.fail_next:
            status = self.fail_next.pop(0)
            return web.json_response({"message": "scripted failure"}, status=status, headers={"Retry-After": "0"})
        if not self._authorized(request.headers.get("Authorization", "")):
            return web.json_response({"message": "Invalid credentials. Confirm that you've configured the correct "
                                                 "host."}, status=401)
        if self.garbage or (self.garbage_after is not None and self.reads > self.garbage_after):
            return web.Response(text="<html>gateway</html>", content_type="text/html")
        return None

    async def _projects(self, request: web.Request) -> web.Response:
        refusal = self._refusal(request)
        return refusal or web.json_response({"data": [{"id": "test-project", "name": "test", "metadata": {}}]})

    async def _traces(self, request: web.Request) -> web.Response:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        query = request.query
        if "filter" in query:
            self.filters.append(query["filter"])
        rows = sorted((trace_row(obs) for obs in self.observations.values()), key=lambda r: r["timestamp"],
                      reverse=query.get("orderBy") == "timestamp.desc")
        if "fromTimestamp" in query:
            rows = [r for r in rows if r["timestamp"] >= query["fromTimestamp"][:23]]
        if "toTimestamp" in query:
            rows = [r for r in rows if r["timestamp"] < query["toTimestamp"][:23]]
        page, limit = int(query.get("page", 1)), int(query.get("limit", 50))
        meta = {"page": page, "limit": limit, "totalItems": len(rows), "totalPages": -(-len(rows) // limit)}
        parse_obj_as(MetaResponse, meta)  # the SDK's type of the pagination object
        return web.json_response({"data": rows[(page - 1) * limit: page * limit], "meta": meta})

    async def _scores_v3(self, request: web.Request) -> web.Response:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        self.score_queries.append({"endpoint": "v3", **request.query})
        if not self.v3_scores:
            return web.json_response({"message": "Not Found"}, status=404)
        answer = v3_answer(self.stored_scores(), request.query)
        if self.odd_rows and answer.status == 200 and "cursor" not in request.query:
            body = json.loads(answer.text or "{}")
            return web.json_response({**body, "data": [*body["data"], *self.odd_rows]})
        return answer

    async def _scores_v2(self, request: web.Request) -> web.Response:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        self.score_queries.append({"endpoint": "v2", **request.query})
        return v2_answer(self.stored_scores(), request.query)

    async def _observations(self, request: web.Request) -> web.Response:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        query = request.query
        rows = self.observations.get(query.get("traceId", ""), [])
        start, limit = int(query.get("cursor") or 0), int(query.get("limit", 50))
        end = start + limit
        body = {"data": rows[start:end], "meta": {"cursor": str(end) if end < len(rows) else None}}
        parse_obj_as(ObservationsV2Response, body)  # the SDK's type of the answer
        return web.json_response(body)

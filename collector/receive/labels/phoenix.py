"""People's labels in Phoenix: span annotations (a run) and session annotations (a conversation)
with ``annotator_kind = HUMAN``, in every project of the server (``[sinks.phoenix]`` names none).

Phoenix 20's REST listing of annotations needs the span or session ids, or a non-empty
``identifier`` (a person's annotation usually has none, or ``px-app:<user>`` when the UI writes
it with auth on); no API lists annotations by time. Its GraphQL API (``POST /graphql``) filters a
project's spans and sessions by their annotations, so a pull sweeps, per project:

- ``Project.spans(filterCondition: "not ('tracescore:' in annotations['NAME'].identifier) or ...",
  timeRange: {start})``: the spans that started in the last ``since_s`` seconds and carry an
  annotation of a known scorer name that is not tracescore's own (its identifiers start with
  ``tracescore:``), with their annotations of those names (``spanAnnotations(filter: {include:
  {names}})``: annotator kind, result, identifier, user, ``updatedAt``) and the span's trace id;
- ``Project.sessions(sessionFilterCondition: "any(a.name in [...] and not ('tracescore:' in
  a.identifier) for a in session_annotations)", timeRange: {start})``: the sessions active in that
  window with such a session annotation.

Of those, the HUMAN annotations changed since the cursor (`collector.receive.labels.sweep`) are
handed on: value = ``score``, else ``label``; rationale = ``explanation``; annotator = the user's
name, else the ``identifier``, else the ``source`` (``API`` / ``APP``); ``at`` = ``updatedAt``
(Phoenix keeps seconds); ``source_id`` = the annotation's id. A label added later to an older
span is found by the next pull, as long as the span started within ``since`` (a label on an
older span is never read).

A pull costs one request per 100 projects for the project list, then per project and per five
scorer names one request for spans and one for sessions per 200 labelled items: it reads the
labelled items of the whole window every time, which people's labelling keeps small (a span
that carries only tracescore's annotations is not returned). Phoenix's trace annotations are
not read.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from collector.common.errors import PullError
from collector.common.labels import Label
from collector.config import SinksConfig
from collector.receive.labels.reader import BackendReader, chunks
from collector.receive.labels.sweep import Sweep, epoch_s, iso_time
from collector.receive.pull import JsonClient, Retry
from collector.receive.pull.client import expect

OWN_PREFIX = "tracescore:"
"""How tracescore's own annotations' identifiers start (`collector.export.sinks.phoenix.identifier`)."""
NAMES_PER_QUERY = 5
ITEMS_PER_QUERY = 200

_FIELDS = "id name annotatorKind label score explanation identifier source updatedAt user { username }"
PROJECTS = ("query ($after: String) { projects(first: 100, after: $after) { "
            "pageInfo { hasNextPage endCursor } edges { node { id name } } } }")
SPANS = ("query ($project: ID!, $first: Int!, $after: String, $filter: String!, $names: [String!]!, "
         "$start: DateTime!) { node(id: $project) { ... on Project { items: spans(first: $first, after: $after, "
         "filterCondition: $filter, timeRange: {start: $start}) { pageInfo { hasNextPage endCursor } edges { node { "
         "context { traceId spanId } annotations: spanAnnotations(filter: {include: {names: $names}}) { "
         f"{_FIELDS} }} }} }} }} }} }} }}")
SESSIONS = ("query ($project: ID!, $first: Int!, $after: String, $filter: String!, $start: DateTime!) { "
            "node(id: $project) { ... on Project { items: sessions(first: $first, after: $after, "
            "sessionFilterCondition: $filter, timeRange: {start: $start}) { pageInfo { hasNextPage endCursor } "
            f"edges {{ node {{ sessionId annotations: sessionAnnotations {{ {_FIELDS} }} }} }} }} }} }} }}")


def span_filter(names: Sequence[str]) -> str:
    """The span filter (Phoenix's Python-like expression) of spans with an annotation of one of
    ``names`` that is not tracescore's.

    Example:
        >>> span_filter(["Relevance", 'Say "hi"'])
        'not ("tracescore:" in annotations["Relevance"].identifier) or not ("tracescore:" in annotations["Say \\\\"hi\\\\""].identifier)'
    """
    own = json.dumps(OWN_PREFIX)
    return " or ".join(f"not ({own} in annotations[{json.dumps(name)}].identifier)" for name in names)


def session_filter(names: Sequence[str]) -> str:
    """The session filter of sessions with a session annotation of one of ``names`` that is not
    tracescore's.

    Example:
        >>> session_filter(["Goal met"])
        'any(a.name in ["Goal met"] and not ("tracescore:" in a.identifier) for a in session_annotations)'
    """
    listed = "[" + ", ".join(json.dumps(name) for name in names) + "]"
    return f"any(a.name in {listed} and not ({json.dumps(OWN_PREFIX)} in a.identifier) for a in session_annotations)"


def annotation_label(item: Mapping[str, Any], names: Sequence[str], trace_id: str, span_id: str | None,
                     session_id: str | None) -> list[Label]:
    """The label an annotation of a span or session is (none when it is not a person's, not of
    ``names``, or tracescore's own).

    Example:
        >>> a = {"id": "U3BhbkFubm90YXRpb246MQ==", "name": "Q", "annotatorKind": "HUMAN", "label": "pass",
        ...      "score": None, "explanation": "fine", "identifier": "", "source": "APP",
        ...      "updatedAt": "2026-12-06T06:02:20+00:00", "user": {"username": "ana"}}
        >>> [(x.value, x.annotator, x.rationale, x.at) for x in annotation_label(a, ["Q"], "ab" * 16, "cd" * 8, None)]
        [('pass', 'ana', 'fine', 1796536940.0)]
        >>> annotation_label({**a, "annotatorKind": "LLM"}, ["Q"], "ab" * 16, "cd" * 8, None)
        []
    """
    identifier = str(item.get("identifier") or "")
    if item["annotatorKind"] != "HUMAN" or item["name"] not in names or identifier.startswith(OWN_PREFIX):
        return []
    score = item.get("score")
    value = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else item.get("label")
    user = item.get("user") or {}
    annotator = str(user.get("username") or identifier or item.get("source") or "")
    explanation = item.get("explanation")
    return [Label(str(item["name"]), trace_id, span_id, session_id, value, "phoenix", annotator=annotator,
                  rationale=None if explanation is None else str(explanation), at=epoch_s(item["updatedAt"]),
                  source_id=str(item["id"]))]


class PhoenixLabels(BackendReader):
    """People's span and session annotations, in every project of one Phoenix server."""

    def __init__(self, sinks: SinksConfig, retry: Retry | None = None, page_size: int = 500) -> None:
        super().__init__("phoenix", sinks.phoenix.url(), sinks, retry, page_size)
        self.graphql_url = f"{self.base_url}/graphql"

    async def pages(self, cursor: str | None, since_s: float,
                    names: Sequence[str]) -> AsyncIterator[tuple[list[Label], str]]:
        """The labels new or changed since ``cursor``, in pages (see the module docstring).

        Raises:
            collector.common.errors.PullError: Phoenix refused, failed or garbled an answer.
        """
        self.begin()
        now = time.time()
        sweep = Sweep(cursor, names, since_s=since_s, now=now, page_size=self.page_size)
        wanted = sorted(set(names))
        start = iso_time(now - since_s)
        if wanted:
            async with self.client() as client:
                for project in await self._projects(client):
                    for group in chunks(wanted, NAMES_PER_QUERY):
                        spans = {"filter": span_filter(group), "names": group, "start": start}
                        async for labels in self._items(client, SPANS, project, spans, group, "spans"):
                            for page in sweep.add(labels):
                                yield page, sweep.resume
                        sessions = {"filter": session_filter(group), "start": start}
                        async for labels in self._items(client, SESSIONS, project, sessions, group, "sessions"):
                            for page in sweep.add(labels):
                                yield page, sweep.resume
        yield sweep.finish()

    async def _graphql(self, client: JsonClient, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """One GraphQL request's ``data`` (its ``errors`` are a `PullError`)."""
        where = f"POST {self.graphql_url}"
        body = expect(where, await client.post(self.graphql_url, {"query": query, "variables": variables}),
                      dict, "a JSON object")
        errors = body.get("errors")
        if errors:
            first = errors[0].get("message") if isinstance(errors, list) and isinstance(errors[0], dict) else errors
            raise PullError(f"{where}: GraphQL error: {str(first)[:300]}")
        return expect(where, body.get("data"), dict, "GraphQL data")

    async def _connection(self, client: JsonClient, query: str, variables: dict[str, Any],
                          *path: str) -> tuple[list[Any], str | None]:
        """One page of a GraphQL connection at ``path`` in the answer: its edges, and the cursor of
        the page after it (None: the last). A project gone meanwhile is an empty connection."""
        found: Any = await self._graphql(client, query, variables)
        for key in path:
            found = found.get(key) if isinstance(found, dict) else None
        found = found or {}
        where = f"POST {self.graphql_url}"
        edges = expect(where, expect(where, found, dict, f"a connection at {'.'.join(path)}").get("edges") or [],
                       list, "a list of edges")
        page = found.get("pageInfo")
        after = page.get("endCursor") if isinstance(page, dict) and page.get("hasNextPage") and edges else None
        return edges, str(after) if after else None

    async def _projects(self, client: JsonClient) -> list[str]:
        """The ids of every project."""
        ids: list[str] = []
        after: str | None = None
        while True:
            edges, after = await self._connection(client, PROJECTS, {"after": after}, "projects")
            ids.extend(self.rows(edges, lambda edge: [str(edge["node"]["id"])]))
            if after is None:
                return ids

    async def _items(self, client: JsonClient, query: str, project: str, variables: dict[str, Any],
                     names: Sequence[str], kind: str) -> AsyncIterator[list[Label]]:
        """The people's labels on a project's spans or sessions that the filter finds, a page of
        items at a time."""
        after: str | None = None
        while True:
            edges, after = await self._connection(client, query, {"project": project, "first": ITEMS_PER_QUERY,
                                                                  "after": after, **variables}, "node", "items")

            def annotated(edge: Any) -> list[tuple[tuple[str, str | None, str | None], Any]]:
                node = edge["node"]
                ids: tuple[str, str | None, str | None] = ("", None, None)
                if kind == "spans":
                    ids = (str(node["context"]["traceId"]), str(node["context"]["spanId"]), None)
                else:
                    ids = ("", None, str(node["sessionId"]))
                return [(ids, item) for item in node["annotations"]]

            pairs = self.rows(edges, annotated)
            yield self.rows(pairs, lambda pair: annotation_label(pair[1], names, *pair[0]))
            if after is None:
                return

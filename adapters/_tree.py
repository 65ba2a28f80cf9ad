"""The span tree of one trace, made safe: unique ids, no cycles, dangling parents become roots.

Owned by the adapters. Every later step walks this tree and may assume it is a forest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from adapters._runs import Skip
from adapters._trace import TraceSpan

__all__ = ["SpanTree"]


class SpanTree:
    """Parent/child links of a trace's spans, repaired where the data is broken.

    A later span reusing an id is dropped (``duplicate_span_id``); a span whose parent
    chain loops back to itself is made a root (``parent_cycle``); a parent id that names
    no span in the trace makes the span a root silently (normal for partial traces).

    Example:
        >>> a = TraceSpan("t" * 32, "a" * 16, "b" * 16, "a")
        >>> b = TraceSpan("t" * 32, "b" * 16, "a" * 16, "b")
        >>> tree = SpanTree([a, b])
        >>> (len(tree.roots()), [s.reason for s in tree.skipped])
        (1, ['parent_cycle'])
    """

    def __init__(self, spans: Iterable[TraceSpan]) -> None:
        self.skipped: list[Skip] = []
        self.by_id: dict[str, TraceSpan] = {}
        order: list[TraceSpan] = []
        for span in spans:
            if span.span_id in self.by_id:
                self.skipped.append(Skip(span.span_id, "duplicate_span_id"))
                continue
            self.by_id[span.span_id] = span
            order.append(span)
        self.spans: list[TraceSpan] = sorted(order, key=lambda s: (s.start_ns, s.end_ns))
        self.parent: dict[str, str | None] = {}
        for span in self.spans:
            pid = span.parent_span_id
            self.parent[span.span_id] = pid if pid in self.by_id and pid != span.span_id else None
            if pid == span.span_id:
                self.skipped.append(Skip(span.span_id, "parent_cycle"))
        self._break_cycles()
        self.children: dict[str, list[str]] = {sid: [] for sid in self.by_id}
        for span in self.spans:
            pid = self.parent[span.span_id]
            if pid is not None:
                self.children[pid].append(span.span_id)
        self.depth: dict[str, int] = {}
        for span in self.spans:
            self._depth_of(span.span_id)

    def _break_cycles(self) -> None:
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done
        for start in self.parent:
            path: list[str] = []
            node: str | None = start
            while node is not None and state.get(node) is None:
                state[node] = 1
                path.append(node)
                node = self.parent[node]
            if node is not None and state.get(node) == 1:
                # node is on the current path: cut the link that closes the loop
                self.skipped.append(Skip(node, "parent_cycle"))
                self.parent[node] = None
            for visited in path:
                state[visited] = 2

    def _depth_of(self, span_id: str) -> int:
        chain: list[str] = []
        node: str | None = span_id
        while node is not None and node not in self.depth:
            chain.append(node)
            node = self.parent[node]
        base = -1 if node is None else self.depth[node]
        for sid in reversed(chain):
            base += 1
            self.depth[sid] = base
        return self.depth[span_id]

    def roots(self) -> list[TraceSpan]:
        """Spans without a (known) parent, in start order.

        Example:
            >>> SpanTree([TraceSpan("t" * 32, "a" * 16, "f" * 16, "a")]).roots()[0].name
            'a'
        """
        return [s for s in self.spans if self.parent[s.span_id] is None]

    def ancestors(self, span_id: str) -> list[str]:
        """Ids from the span's parent up to its root.

        Example:
            >>> t = SpanTree([TraceSpan("t" * 32, "a" * 16, None, "a"), TraceSpan("t" * 32, "b" * 16, "a" * 16, "b")])
            >>> t.ancestors("b" * 16) == ["a" * 16]
            True
        """
        out = []
        node = self.parent.get(span_id)
        while node is not None:
            out.append(node)
            node = self.parent[node]
        return out

    def descendants(self, span_id: str) -> list[str]:
        """Ids of every span below ``span_id`` (depth first).

        Example:
            >>> t = SpanTree([TraceSpan("t" * 32, "a" * 16, None, "a"), TraceSpan("t" * 32, "b" * 16, "a" * 16, "b")])
            >>> t.descendants("a" * 16) == ["b" * 16]
            True
        """
        out: list[str] = []
        stack = list(reversed(self.children.get(span_id, [])))
        while stack:
            sid = stack.pop()
            out.append(sid)
            stack.extend(reversed(self.children[sid]))
        return out

    def lowest_common_ancestor(self, span_ids: Sequence[str]) -> str | None:
        """The deepest span that is (or is above) all of ``span_ids``; None if they share no root.

        Example:
            >>> t = SpanTree([TraceSpan("t" * 32, "a" * 16, None, "a"),
            ...               TraceSpan("t" * 32, "b" * 16, "a" * 16, "b"),
            ...               TraceSpan("t" * 32, "c" * 16, "a" * 16, "c")])
            >>> t.lowest_common_ancestor(["b" * 16, "c" * 16]) == "a" * 16
            True
        """
        if not span_ids:
            return None
        common: list[str] | None = None
        for sid in span_ids:
            path = list(reversed([sid, *self.ancestors(sid)]))
            if common is None:
                common = path
                continue
            n = 0
            while n < len(common) and n < len(path) and common[n] == path[n]:
                n += 1
            common = common[:n]
            if not common:
                return None
        return common[-1] if common else None

"""Graph walks the flow checks share: rings in a directed graph of names."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence


def rings(edges: Mapping[str, Sequence[str]]) -> Iterator[list[str]]:
    """Each ring of ``edges`` (name -> the names it points to) once, as a
    chain that ends where it began, in the order an iterative depth-first
    walk from each name in turn meets them; a ring met again from another
    of its names is not repeated. Lazy: the first ring costs only the walk
    up to it."""
    keys: set[tuple[str, ...]] = set()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for start in edges:
        if state.get(start):
            continue
        path, stack = [start], [iter(edges.get(start, ()))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                ring = path[path.index(nxt):]
                pivot = ring.index(min(ring))
                key = tuple(ring[pivot:] + ring[:pivot])
                if key not in keys:
                    keys.add(key)
                    yield [*ring, nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(edges.get(nxt, ())))

"""A layered left-to-right layout of a directed graph, the one both pages draw with (the
lineage page's dataset and field graphs, ``coord serve``'s graph of datasets).

Sugiyama-style, without dummy nodes: a node's layer is the longest path to it from a node
without inputs; within a layer, nodes are ordered by the mean position of their neighbours,
sweeping down and up a few times and keeping the ordering with the fewest crossings; then
neighbours within a layer trade places while that removes crossings (the "transpose" step).
A heuristic: it never adds crossings to the sorted start and finds none in the usual pipeline
shapes (chains, trees, fan-in), but a dense layer pair may keep a few more than the optimum.

Invariants:
- Every node gets a place: ``(layer, order)``, orders ``0..n-1`` within a layer, each edge
  (of an acyclic graph) going to a higher layer. A cycle (chains say what they say) does not
  loop forever: layers are relaxed at most once per node.
- Deterministic: ties keep the order of the node keys as given, sorted.
- ``crossings`` of the result is at most that of the initial (sorted) ordering.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

Place = tuple[int, int]  # (layer, order within the layer)
SWEEPS = 4


def layered(nodes: Iterable[str], edges: Iterable[Sequence[str]]) -> dict[str, Place]:
    """The place of every node (edges naming unknown nodes are ignored)."""
    keys = sorted(set(nodes))
    known = set(keys)
    links = [(a, b) for a, b in edges if a in known and b in known and a != b]
    layer = dict.fromkeys(keys, 0)
    for _ in keys:  # longest path, relaxed at most once per node
        changed = False
        for a, b in links:
            if layer[b] < layer[a] + 1:
                layer[b], changed = layer[a] + 1, True
        if not changed:
            break
    layers: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for k in keys:
        layers[layer[k]].append(k)
    best = _places(layers)
    fewest = crossings(best, links)
    inputs = {k: [a for a, b in links if b == k] for k in keys}
    outputs = {k: [b for a, b in links if a == k] for k in keys}
    for sweep in range(SWEEPS * 2):
        down = sweep % 2 == 0
        order = range(1, len(layers)) if down else range(len(layers) - 2, -1, -1)
        place = _places(layers)
        for i in order:
            neighbours = inputs if down else outputs
            layers[i] = _by_barycenter(layers[i], neighbours, place)
            place.update(_places([layers[i]], i))
        count = crossings(place, links)
        if count < fewest:
            best, fewest = place, count
    return _transposed(best, links)


def crossings(place: dict[str, Place], edges: Iterable[Sequence[str]]) -> int:
    """Pairs of edges between the same two adjacent layers that cross."""
    by_layers: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for a, b in edges:
        (la, oa), (lb, ob) = place[a], place[b]
        if lb == la + 1:
            by_layers.setdefault((la, lb), []).append((oa, ob))
    count = 0
    for spans in by_layers.values():
        for i, (a1, b1) in enumerate(spans):
            count += sum(1 for a2, b2 in spans[i + 1:] if (a1 - a2) * (b1 - b2) < 0)
    return count


def _transposed(place: dict[str, Place], links: list[tuple[str, str]]) -> dict[str, Place]:
    """``place`` with adjacent nodes of a layer swapped while a swap removes crossings (a
    swap changes only the crossings of edges touching that layer: only those are counted)."""
    place = dict(place)
    layers: list[list[str]] = [[] for _ in range(1 + max((p[0] for p in place.values()), default=-1))]
    for k, (layer, _) in sorted(place.items(), key=lambda item: item[1]):
        layers[layer].append(k)
    touching = [[(a, b) for a, b in links if i in (place[a][0], place[b][0])] for i in range(len(layers))]
    for _ in range(SWEEPS):
        improved = False
        for i, members in enumerate(layers):
            for o in range(len(members) - 1):
                before = crossings(place, touching[i])
                a, b = members[o], members[o + 1]
                place[a], place[b] = (i, o + 1), (i, o)
                if crossings(place, touching[i]) < before:
                    members[o], members[o + 1], improved = b, a, True
                else:
                    place[a], place[b] = (i, o), (i, o + 1)
        if not improved:
            break
    return place


def _places(layers: list[list[str]], first: int = 0) -> dict[str, Place]:
    return {k: (first + i, o) for i, members in enumerate(layers) for o, k in enumerate(members)}


def _by_barycenter(members: list[str], neighbours: dict[str, list[str]],
                   place: dict[str, Place]) -> list[str]:
    """``members`` by the mean order of their neighbours; one without keeps its position."""
    def weight(item: tuple[int, str]) -> tuple[float, int]:
        position, k = item
        seen = [place[n][1] for n in neighbours[k]]
        return (sum(seen) / len(seen) if seen else float(position), position)

    return [k for _, k in sorted(enumerate(members), key=weight)]

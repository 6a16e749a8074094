"""The layered layout both pages draw with (``coordinator/lineage/layout.py``), checked
without a browser: layers by longest path, orders without gaps, crossings no more than the
sorted start and none where a drawing without any exists."""
from __future__ import annotations

import random

from coordinator.lineage.layout import crossings, layered

# the README's example pipeline: two roots, their derivatives, a root nothing reads
README = (["nyc.flights", "nyc.weather", "airlines", "nyc.flights.long-delays", "nyc.weather.daily"],
          [("nyc.flights", "nyc.flights.long-delays"), ("nyc.weather", "nyc.weather.daily")])


def test_a_layer_is_the_longest_path_from_a_node_without_inputs():
    place = layered("abcde", [("a", "b"), ("b", "c"), ("a", "c"), ("d", "c"), ("c", "e")])
    assert {k: layer for k, (layer, _) in place.items()} == {"a": 0, "d": 0, "b": 1, "c": 2, "e": 3}


def test_orders_number_each_layer_from_zero_without_gaps():
    place = layered("abcdefg", [("a", "e"), ("b", "e"), ("c", "f"), ("d", "g")])
    for layer in {p[0] for p in place.values()}:
        assert sorted(o for lay, o in place.values() if lay == layer) == list(range(
            sum(1 for p in place.values() if p[0] == layer)))


def test_two_layers_that_cross_in_name_order_are_drawn_without_a_crossing():
    # sorted, a-b-c over x-y-z with a->z, b->y, c->x crosses three times; reversed, never
    edges = [("a", "z"), ("b", "y"), ("c", "x")]
    start = {"a": (0, 0), "b": (0, 1), "c": (0, 2), "x": (1, 0), "y": (1, 1), "z": (1, 2)}
    assert crossings(start, edges) == 3
    assert crossings(layered("abcxyz", edges), edges) == 0


def test_the_readme_pipeline_has_no_crossing():
    nodes, edges = README
    assert crossings(layered(nodes, edges), edges) == 0


def test_a_graph_whose_every_drawing_crosses_keeps_the_fewest():
    # K(2,2) plus nothing: any order of two over two crosses exactly once
    edges = [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]
    assert crossings(layered("abxy", edges), edges) == 1


def test_random_trees_either_way_are_drawn_without_a_crossing():
    rng = random.Random(32)
    for _ in range(30):
        nodes = [f"d{i:02}" for i in range(30)]
        rng.shuffle(nodes)  # names in no relation to the shape
        out_tree = [(nodes[rng.randrange(i)], nodes[i]) for i in range(1, len(nodes))]  # one input each
        in_tree = [(b, a) for a, b in out_tree]  # one reader each
        for edges in (out_tree, in_tree):
            assert crossings(layered(nodes, edges), edges) == 0


def test_random_layer_pairs_never_get_more_crossings_than_the_sorted_start():
    rng = random.Random(32)
    for _ in range(50):
        edges = [(f"t{i}", f"u{j}") for i in range(5) for j in range(5) if rng.random() < 0.3]
        ends = sorted({n for e in edges for n in e})
        start = {n: (0 if n[0] == "t" else 1, i) for i, n in enumerate(x for x in ends if x[0] == "t")}
        start |= {n: (1, i) for i, n in enumerate(x for x in ends if x[0] == "u")}
        assert crossings(layered(ends, edges), edges) <= crossings(start, edges)


def test_every_edge_of_a_dag_goes_right_and_a_cycle_ends():
    edges = [("a", "b"), ("b", "c"), ("a", "c")]
    place = layered("abc", edges)
    assert all(place[a][0] < place[b][0] for a, b in edges)
    cyclic = layered("xy", [("x", "y"), ("y", "x")])  # chains say what they say: it still ends
    assert set(cyclic) == {"x", "y"}

"""The §5.2 sync cost model reproduces the chapter's table exactly.

Expected numbers are the chapter's printed output (issue=1, latency=30,
compute=20, barrier=8, iterations=16), not our own output."""

import pytest

from tilelint.analysis import cost

CHAPTER_TOTAL = {
    3: {"none": 350, "war": 350, "war+raw": 388, "+cb": 478, "sync-copy": 628},
    6: {"none": 350, "war": 350, "war+raw": 358, "+cb": 478, "sync-copy": 628},
}
CHAPTER_STEADY = {
    3: {"none": 20.0, "war": 20.0, "war+raw": 22.6, "+cb": 28.0, "sync-copy": 38.0},
    6: {"none": 20.0, "war": 20.0, "war+raw": 20.0, "+cb": 28.0, "sync-copy": 38.0},
}


@pytest.mark.parametrize("depth", [3, 6])
@pytest.mark.parametrize("variant", cost.VARIANTS)
def test_chapter_table(depth, variant):
    r = cost.simulate(variant, depth, cost.CostParams(**cost.CHAPTER_PARAMS))
    assert r.total == CHAPTER_TOTAL[depth][variant]
    # the chapter prints one decimal
    assert f"{r.steady:.1f}" == f"{CHAPTER_STEADY[depth][variant]:.1f}"


def test_sync_copy_at_latency_120():
    for depth in (3, 6):
        r = cost.simulate("sync-copy", depth, cost.CostParams(latency=120))
        assert r.steady == 128.0


def test_reasoned_properties():
    p = cost.CostParams()
    # No sync: one compute per 20 cycles after the first load's latency.
    assert cost.simulate("none", 3, p).total == p.latency + p.iterations * p.compute
    # An extra consumer-chain barrier costs one barrier per step once depth >= 3
    # (at depth 2 the slot-release path is longer still).
    for d in (3, 6, 12):
        assert cost.simulate("+cb", d, p).steady == p.compute + p.barrier
    # war+raw at depth 3: a slot comes back after compute + barrier + latency + barrier
    # = 66 cycles per 3 iterations (22 per step in the long run).
    long = cost.simulate("war+raw", 3, cost.CostParams(iterations=300))
    assert abs(long.steady - 22.0) < 0.1


def test_rendered_table_is_labelled():
    text = cost.render_table()
    assert "model, not a measurement" in text
    assert "350cyc" in text and "628cyc" in text
    assert "war+raw=22.6" in text


def test_bad_variant():
    with pytest.raises(ValueError):
        cost.simulate("nope", 3)

import pytest

from helpers.roofline import (
    arithmetic_intensity,
    decode_floor_s,
    measure_bandwidth,
    measure_flops,
    prefill_floor_s,
)


def test_floors_by_hand():
    # 16 GB of weights at 1.8 TB/s: 8.9 ms per decode step at batch 1 with no context
    assert decode_floor_s(16e9, 131072, 0, 1.8e12) == pytest.approx(16e9 / 1.8e12)
    # 1000 tokens of context add 131 MB per sequence
    assert decode_floor_s(16e9, 131072, 1000, 1.8e12, batch=2) == pytest.approx((16e9 + 2 * 131072e3) / 1.8e12)
    assert prefill_floor_s(8e9, 1000, 1e15) == pytest.approx(0.016)
    assert arithmetic_intensity(8e9, 16e9, 1) == 1.0  # bf16 decode at batch 1: one FLOP per byte


def test_probes_measure_something_plausible():
    bandwidth = measure_bandwidth(megabytes=64, repeats=2)
    flops = measure_flops(n=256, repeats=2)
    assert 1e8 < bandwidth < 1e13
    assert 1e7 < flops < 1e15


@pytest.mark.parametrize("call", [
    lambda: decode_floor_s(1, 1, 1, 0),
    lambda: prefill_floor_s(1, 1, -1),
    lambda: measure_bandwidth(megabytes=0),
    lambda: measure_flops(n=0),
])
def test_invalid(call):
    with pytest.raises(ValueError):
        call()

"""Field modes of the batch builder: inc, dec, random (RFC 4814), unique (RFC 9693), seeds.

Frames are built with ``compile_stream`` + ``BatchBuilder`` and the fields are read back
from the frame bytes (IPv4/UDP without VLAN: ports at offsets 34 and 36, addresses at 26
and 30).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.compile import compile_stream
from tgen_tui.packets.prng import FeistelPermutation
from tgen_tui.profiles.loader import load_profile

from .tgen_unit_helpers import (
    PROFILES,
    build,
    check_signatures,
    column,
    frames,
    program_of,
    rebuilt_with_fresh_checksums,
)

SPORT, DPORT, IPSRC, IPDST = 34, 36, 26, 30

try:  # scipy is optional
    from scipy.stats import chi2 as _chi2
except ImportError:  # pragma: no cover - depends on the environment
    _chi2 = None


def chi2_critical(df: int, p: float = 0.999) -> float:
    """Upper critical value of chi-square (scipy, else Wilson–Hilferty; z(0.999) = 3.0902)."""
    if _chi2 is not None:
        return float(_chi2.ppf(p, df))
    assert p == 0.999
    z = 3.090232306167813
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi2_stat(observed: np.ndarray, expected: np.ndarray) -> float:
    return float(((observed - expected) ** 2 / expected).sum())


def test_chi2_critical_value_sane():
    # table values: df 9 → 27.88, df 63 → 103.4 (99.9 %)
    assert chi2_critical(9) == pytest.approx(27.88, rel=0.02)
    assert chi2_critical(63) == pytest.approx(103.44, rel=0.01)


def udp_stream(src_port, dst_port, **kw) -> dict:
    d = {"udp": {"src_port": src_port, "dst_port": dst_port}}
    d.update(kw)
    return d


# --------------------------------------------------------------------------- inc / dec
def test_inc_steps_by_one_and_wraps_to_min():
    prog = program_of(udp_stream({"min": 1000, "max": 1009, "mode": "inc"}, 7))
    buf, _ = build(prog, 0, 25)
    got = column(buf, SPORT, 2).tolist()
    assert got == [1000 + i % 10 for i in range(25)]
    assert column(buf, DPORT, 2).tolist() == [7] * 25


def test_inc_with_step_wraps_modulo_span():
    prog = program_of(udp_stream({"min": 100, "max": 109, "mode": "inc", "step": 3}, 7))
    buf, _ = build(prog, 0, 30)
    got = column(buf, SPORT, 2).tolist()
    assert got[:5] == [100, 103, 106, 109, 102]  # 109 + 3 wraps back into [100, 109]
    assert got == [100 + (3 * i) % 10 for i in range(30)]
    assert set(got) == set(range(100, 110))  # gcd(3, 10) = 1: every value is visited


def test_dec_mirrors_inc():
    prog = program_of(udp_stream(7, {"min": 1000, "max": 1009, "mode": "dec"}))
    buf, _ = build(prog, 0, 25)
    assert column(buf, DPORT, 2).tolist() == [1009 - i % 10 for i in range(25)]
    prog = program_of(udp_stream(7, {"min": 100, "max": 109, "mode": "dec", "step": 4}))
    buf, _ = build(prog, 0, 12)
    assert column(buf, DPORT, 2).tolist() == [109 - (4 * i) % 10 for i in range(12)]


def test_inc_ipv4_address_carries_across_octets_with_valid_checksums():
    prog = program_of(
        {
            "ipv4": {"src": {"min": "10.0.0.250", "max": "10.0.1.4", "mode": "inc"}},
            "udp": {},
        }
    )
    fl = frames(prog, 0, 20)
    base = (10 << 24) | 250
    for i, f in enumerate(fl):
        assert int.from_bytes(f[IPSRC : IPSRC + 4], "big") == base + i % 11
        assert rebuilt_with_fresh_checksums(f) == f, f"frame {i}"
    check_signatures(fl, 0)


def test_inc_large_start_index_no_overflow():
    """A frame index near 2**40 still gives min + (i*step) mod span."""
    prog = program_of(udp_stream({"min": 1, "max": 65535, "mode": "inc", "step": 7}, 7))
    start = (1 << 40) + 12345
    buf, _ = build(prog, start, 100)
    got = column(buf, SPORT, 2).tolist()
    assert got == [1 + ((start + i) * 7) % 65535 for i in range(100)]


# --------------------------------------------------------------------------- random
N_RANDOM = 60_000


@pytest.fixture(scope="module")
def rfc4814_ports():
    prog = program_of(
        udp_stream(
            {"min": 1024, "max": 65535, "mode": "random"},
            {"min": 1, "max": 49151, "mode": "random"},
        ),
        seed=4814,
    )
    buf, lens = build(prog, 0, N_RANDOM)
    return prog, column(buf, SPORT, 2).astype(np.int64), column(buf, DPORT, 2).astype(np.int64)


def _uniform_chi2(values: np.ndarray, lo: int, span: int, bins: int) -> tuple[float, float]:
    """Chi-square of ``values`` against uniform on [lo, lo+span) in ``bins`` bins."""
    b = (values - lo) * bins // span
    observed = np.bincount(b, minlength=bins).astype(float)
    # exact expected counts: bins may differ in width by one value
    width = np.bincount(np.arange(span) * bins // span, minlength=bins)
    expected = len(values) * width / span
    return chi2_stat(observed, expected), chi2_critical(bins - 1)


def test_chi_square_detects_a_small_bias():
    """Power check of the statistic itself: a generator missing the top 2 % of the range fails."""
    rng = np.random.default_rng(1)
    biased = 1024 + (rng.integers(0, 64512, N_RANDOM) * 0.98).astype(np.int64)
    stat, crit = _uniform_chi2(biased, 1024, 64512, 64)
    assert stat > crit
    fair = rng.integers(1024, 65536, N_RANDOM)
    stat, crit = _uniform_chi2(fair, 1024, 64512, 64)
    assert stat < crit


def test_random_ports_stay_in_range(rfc4814_ports):
    _, s, d = rfc4814_ports
    assert s.min() >= 1024 and s.max() <= 65535
    assert d.min() >= 1 and d.max() <= 49151
    # spread over the range, not a handful of values
    assert len(np.unique(s)) > 0.5 * N_RANDOM and len(np.unique(d)) > 0.5 * N_RANDOM


@pytest.mark.parametrize("which", ["src", "dst"])
def test_random_ports_uniform_chi_square(rfc4814_ports, which):
    _, s, d = rfc4814_ports
    v, lo, span = (s, 1024, 64512) if which == "src" else (d, 1, 49151)
    stat, crit = _uniform_chi2(v, lo, span, 64)
    assert stat < crit, f"chi-square {stat:.1f} ≥ {crit:.1f} (99.9 %, 63 df)"
    # the low bits must be uniform too (a bad reduction shows here first)
    stat, crit = _uniform_chi2((v - lo) % 16, 0, 16, 16)
    assert stat < crit, f"low-bit chi-square {stat:.1f} ≥ {crit:.1f}"


def test_random_small_range_uniform_and_hits_both_ends():
    prog = program_of(udp_stream({"min": 5000, "max": 5009, "mode": "random"}, 7), seed=3)
    buf, _ = build(prog, 0, 50_000)
    v = column(buf, SPORT, 2).astype(np.int64)
    assert v.min() == 5000 and v.max() == 5009
    stat, crit = _uniform_chi2(v, 5000, 10, 10)
    assert stat < crit, f"chi-square {stat:.1f} ≥ {crit:.1f}"


def test_random_src_and_dst_independent(rfc4814_ports):
    _, s, d = rfc4814_ports
    n = len(s)
    r = np.corrcoef(s, d)[0, 1]
    assert abs(r) < 4.5 / math.sqrt(n), f"corr(src, dst) = {r:.4f}"
    # lag-1 correlation: consecutive frames are independent too
    r1 = np.corrcoef(s[:-1], s[1:])[0, 1]
    assert abs(r1) < 4.5 / math.sqrt(n), f"corr(src[i], src[i+1]) = {r1:.4f}"
    # joint distribution: 8 x 8 contingency table against the product of the marginals
    bs = (s - 1024) * 8 // 64512
    bd = (d - 1) * 8 // 49151
    table = np.zeros((8, 8))
    np.add.at(table, (bs, bd), 1)
    expected = np.outer(table.sum(1), table.sum(0)) / n
    stat = chi2_stat(table, expected)
    crit = chi2_critical(49)
    assert stat < crit, f"independence chi-square {stat:.1f} ≥ {crit:.1f}"


def test_random_fields_of_two_streams_differ():
    """The stream index is part of the key: two streams with the same seed do not repeat each other."""
    st = udp_stream({"min": 1024, "max": 65535, "mode": "random"}, 7)
    a = column(build(program_of(st, index=0), 0, 1000)[0], SPORT, 2)
    b = column(build(program_of(st, index=1), 0, 1000)[0], SPORT, 2)
    assert (a == b).mean() < 0.01


# --------------------------------------------------------------------------- unique
@pytest.fixture(scope="module")
def nat44_program():
    path = next(p for p in PROFILES if p.name == "nat44-stateful.yaml")
    prof = load_profile(path)
    s = prof.streams[0]
    return compile_stream(s, 0, prof.ports[s.port], prof.seed)


def test_unique_covers_product_once_then_repeats(nat44_program):
    prog = nat44_program
    assert prog.unique_space == 400 * 100
    buf, _ = build(prog, 0, 80_000)
    sp = column(buf, SPORT, 2).astype(np.int64)
    dp = column(buf, DPORT, 2).astype(np.int64)
    assert sp.min() == 10000 and sp.max() == 10399
    assert dp.min() == 80 and dp.max() == 179
    key = (sp - 10000) * 100 + (dp - 80)
    first = key[:40_000]
    assert len(np.unique(first)) == 40_000  # no pair repeats
    assert np.array_equal(np.sort(first), np.arange(40_000))  # covers the whole product
    assert np.array_equal(key[40_000:], first)  # the same order again
    # it is a shuffle, not a counter
    assert np.count_nonzero(np.diff(first) == 1) < 400


def test_unique_decoding_destination_fastest(nat44_program):
    """METHODOLOGY: the flat permuted index decodes with the destination port varying fastest."""
    prog = nat44_program
    idx = np.arange(0, 5000, dtype=np.uint64)
    flat = FeistelPermutation(prog.unique_space, prog.unique_key)(idx).astype(np.int64)
    buf, _ = build(prog, 0, 5000)
    assert np.array_equal(column(buf, DPORT, 2).astype(np.int64), 80 + flat % 100)
    assert np.array_equal(column(buf, SPORT, 2).astype(np.int64), 10000 + flat // 100)


def test_unique_four_million_in_chunks():
    prog = program_of(
        udp_stream(
            {"min": 1024, "max": 5023, "mode": "unique"},
            {"min": 1, "max": 1000, "mode": "unique"},
        ),
        seed=9693,
    )
    total, chunk = 4_000_000, 65_536
    assert prog.unique_space == total
    b = BatchBuilder(prog, max_batch=chunk)
    seen = np.zeros(total, dtype=bool)
    for start in range(0, total, chunk):
        n = min(chunk, total - start)
        buf, _ = b.build(start, n, 0)
        sp = column(buf, SPORT, 2).astype(np.int64)
        dp = column(buf, DPORT, 2).astype(np.int64)
        assert sp.min() >= 1024 and sp.max() <= 5023 and dp.min() >= 1 and dp.max() <= 1000
        k = (sp - 1024) * 1000 + (dp - 1)
        assert not seen[k].any(), f"repeat in chunk at {start}"
        seen[k] = True
        assert np.count_nonzero(seen) == start + n, f"duplicate inside chunk at {start}"
    assert seen.all()


def test_unique_single_field():
    prog = program_of(udp_stream({"min": 2000, "max": 2999, "mode": "unique"}, 7))
    buf, _ = build(prog, 0, 2000)
    v = column(buf, SPORT, 2).astype(np.int64)
    assert sorted(v[:1000].tolist()) == list(range(2000, 3000))
    assert np.array_equal(v[1000:], v[:1000])


# --------------------------------------------------------------------------- seeds and batches
MIXED = {
    "ipv4": {
        "src": {"min": "198.18.0.1", "max": "198.18.0.200", "mode": "random"},
        "dst": {"min": "198.19.0.1", "max": "198.19.0.9", "mode": "inc", "step": 2},
    },
    "udp": {
        "src_port": {"min": 1024, "max": 1223, "mode": "unique"},
        "dst_port": {"min": 1, "max": 49151, "mode": "random"},
    },
    "size": {"min": 64, "max": 301, "mode": "random"},
}


def test_same_seed_same_bytes_different_seed_different_bytes():
    a = frames(program_of(MIXED, seed=11), 0, 500)
    b = frames(program_of(MIXED, seed=11), 0, 500)
    c = frames(program_of(MIXED, seed=12), 0, 500)
    assert a == b
    differ = sum(x != y for x, y in zip(a, c, strict=True))
    assert differ > 450, f"only {differ} of 500 frames differ between seeds 11 and 12"


def test_stream_seed_overrides_profile_seed():
    a = frames(program_of(dict(MIXED, seed=5), seed=1), 0, 200)
    b = frames(program_of(dict(MIXED, seed=5), seed=2), 0, 200)
    c = frames(program_of(MIXED, seed=5), 0, 200)
    assert a == b == c


@pytest.mark.parametrize("stream", [MIXED, udp_stream(7, 9, size=64)], ids=["mixed", "fixed"])
def test_batch_boundaries_do_not_change_bytes(stream):
    prog = program_of(stream, seed=21)
    whole = BatchBuilder(prog, max_batch=1000).frames(0, 1000, 123456789)
    b = BatchBuilder(prog, max_batch=1000)
    split = b.frames(0, 300, 123456789) + b.frames(300, 700, 123456789)
    assert whole == split
    small = BatchBuilder(prog, max_batch=7).frames(0, 1000, 123456789)
    assert whole == small
    # a batch starting in the middle equals the same frames of the whole run
    assert BatchBuilder(prog, max_batch=64).frames(613, 50, 123456789) == whole[613:663]
    check_signatures(whole, 0)


def test_mixed_stream_frames_rebuild_identically():
    fl = frames(program_of(MIXED, seed=8), 0, 400)
    lens = {len(f) for f in fl}
    assert len(lens) > 50 and min(lens) >= 60 and max(lens) <= 297
    for i, f in enumerate(fl):
        assert rebuilt_with_fresh_checksums(f) == f, f"frame {i}"

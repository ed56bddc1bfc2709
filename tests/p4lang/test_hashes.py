"""Tests of testbed.p4.v1model.hashes against BMv2's own test vectors and standard CRC check values.

Vectors marked "BMv2" come from p4lang/behavioral-model tests/test_calculations.cpp.
"""

import random

import pytest
from scapy.layers.inet import IP, TCP

from testbed.errors import ParameterError
from testbed.p4.v1model import hashes
from testbed.p4.v1model.hashes import (
    ALGORITHMS, CRC16_PARAMS, CRC32_PARAMS, Crc, CrcParams, checksum16, compute, compute_bytes,
    csum16, hash_extern, pack_fields, xor16,
)

BMV2_INPUT = bytes([0x0B, 0xB8, 0x1F, 0x90])
CHECK_INPUT = b"123456789"


def bitwise_crc(params: CrcParams, data: bytes) -> int:
    """Reference CRC, one bit at a time, straight from the Rocksoft model BMv2 follows."""
    width = params.width
    top, mask = 1 << (width - 1), (1 << width) - 1
    register = params.initial_remainder
    for byte in data:
        if params.data_reflected:
            byte = int(f"{byte:08b}"[::-1], 2)
        register ^= byte << (width - 8)
        for _ in range(8):
            register = ((register << 1) ^ params.polynomial) if register & top else register << 1
            register &= mask
    if params.remainder_reflected:
        register = int(f"{register:0{width}b}"[::-1], 2)
    return register ^ params.final_xor_value


# --- CRCs -------------------------------------------------------------------------------------

def test_crc16_is_crc16_arc():
    assert compute_bytes("crc16", CHECK_INPUT) == 0xBB3D
    assert compute_bytes("crc16", BMV2_INPUT) == 0x5D8A  # BMv2 HashTest.Crc16


def test_crc32_is_iso_hdlc():
    assert compute_bytes("crc32", CHECK_INPUT) == 0xCBF43926
    assert compute_bytes("crc32", BMV2_INPUT) == 0x005D6A6F  # BMv2 HashTest.Crc32


def test_table_driven_crc32_equals_zlib_fast_path():
    rng = random.Random(7)
    crc = Crc(CRC32_PARAMS)
    for length in range(0, 40):
        data = bytes(rng.getrandbits(8) for _ in range(length))
        assert crc(data) == compute_bytes("crc32", data)


def test_custom_crcs_default_to_the_standard_ones():
    assert compute_bytes("crc16_custom", BMV2_INPUT) == 0x5D8A
    assert compute_bytes("crc32_custom", BMV2_INPUT) == 0x005D6A6F


@pytest.mark.parametrize("params, expected", [
    (CrcParams(16, 0x1021, 0xFFFF, 0x0000, False, False), 0x5D75),          # BMv2: crcCCITT
    (CrcParams(16, 0x1021, 0x0000, 0x0000, False, False), 0xD9B5),          # BMv2: XMODEM
    (CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0x00000000, False, False), 0x125E1592),  # BMv2: MPEG-2
])
def test_custom_crc_configurations_match_bmv2_vectors(params, expected):
    algorithm = "crc16_custom" if params.width == 16 else "crc32_custom"
    assert compute_bytes(algorithm, BMV2_INPUT, crc_params=params) == expected


@pytest.mark.parametrize("params, check", [
    (CrcParams(16, 0x1021, 0x0000, 0x0000, False, False), 0x31C3),  # XMODEM
    (CrcParams(16, 0x1021, 0x0000, 0x0000, True, True), 0x2189),    # KERMIT
    (CrcParams(16, 0x8005, 0xFFFF, 0x0000, True, True), 0x4B37),    # MODBUS
    (CrcParams(16, 0x1021, 0xFFFF, 0xFFFF, True, True), 0x906E),
    (CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, False, False), 0xFC891918),  # BZIP2
    (CrcParams(32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, True, True), 0xE3069283),    # CRC-32C
    (CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0x00000000, True, True), 0x340BC6D9),    # JAMCRC
])
def test_custom_crc_check_values(params, check):
    algorithm = "crc16_custom" if params.width == 16 else "crc32_custom"
    assert compute_bytes(algorithm, CHECK_INPUT, crc_params=params) == check


@pytest.mark.parametrize("data_reflected, remainder_reflected",
                         [(True, False), (False, True), (True, True), (False, False)])
def test_table_crc_equals_bitwise_reference_for_every_reflection_mix(data_reflected,
                                                                     remainder_reflected):
    rng = random.Random(3)
    for width, poly, init, xor in ((16, 0x8005, 0x1234, 0xABCD), (32, 0x04C11DB7, 0xDEADBEEF, 0x0F0F0F0F)):
        params = CrcParams(width, poly, init, xor, data_reflected, remainder_reflected)
        crc = Crc(params)
        for length in (0, 1, 5, 13):
            data = bytes(rng.getrandbits(8) for _ in range(length))
            assert crc(data) == bitwise_crc(params, data)


def test_custom_crc_params_of_wrong_width_are_rejected():
    with pytest.raises(ParameterError, match="crc_params.width"):
        compute_bytes("crc16_custom", b"x", crc_params=CRC32_PARAMS)
    with pytest.raises(ParameterError, match="polynomial"):
        Crc(CrcParams(16, 0x18005, 0, 0, True, True))


# --- csum16, xor16, identity ------------------------------------------------------------------

def test_csum16_wikipedia_ipv4_header():
    header = bytes([0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00,
                    0xC0, 0xA8, 0x00, 0x01, 0xC0, 0xA8, 0x00, 0xC7])
    assert csum16(header) == 0xB861  # BMv2 HashTest.Cksum16


def test_csum16_edge_cases():
    assert csum16(b"") == 0xFFFF
    assert csum16(b"\x00\x00") == 0xFFFF
    assert csum16(b"\xff\xff") == 0x0000
    assert csum16(b"\x12") == csum16(b"\x12\x00")  # odd byte padded after
    assert csum16(b"\x80\x00\x80\x00") == 0xFFFE   # end-around carry


def ipv4_fields(packet: IP, checksum: int):
    """The field list a v1model program passes for the IPv4 header checksum."""
    return [(packet.version, 4), (packet.ihl, 4), (packet.tos, 8), (packet.len, 16),
            (packet.id, 16), (int(packet.flags), 3), (packet.frag, 13), (packet.ttl, 8),
            (packet.proto, 8), (checksum, 16) if checksum is not None else (0, 0),
            (int.from_bytes(bytes(map(int, packet.src.split("."))), "big"), 32),
            (int.from_bytes(bytes(map(int, packet.dst.split("."))), "big"), 32)]


@pytest.mark.parametrize("src, dst, ttl, ident", [
    ("10.0.0.1", "10.0.1.2", 64, 0), ("192.168.200.7", "172.16.5.254", 3, 0xBEEF),
    ("1.2.3.4", "255.255.255.255", 255, 0xFFFF)])
def test_ipv4_checksum_equals_scapy(src, dst, ttl, ident):
    wire = IP(bytes(IP(src=src, dst=dst, ttl=ttl, id=ident, flags="DF") / TCP(dport=80)))
    fields_without_checksum = [f for f in ipv4_fields(wire, None) if f[1]]
    assert checksum16(fields_without_checksum) == wire.chksum
    # Verifying: the sum over the header including a correct checksum is zero.
    assert csum16(bytes(wire)[:20]) == 0
    assert checksum16(ipv4_fields(wire, wire.chksum)) == 0


def test_checksum16_with_payload_is_tcp_style():
    assert checksum16([(0x1234, 16)], payload=b"\x00\x01") == csum16(b"\x12\x34\x00\x01")


def test_xor16_bmv2_vectors():
    assert xor16(BMV2_INPUT) == 0x1428                   # BMv2 HashTest.Xor16WithEvenBytes
    assert xor16(BMV2_INPUT + b"\x5a") == 0x4E28         # BMv2 HashTest.Xor16WithOddBytes
    assert compute_bytes("xor16", b"") == 0


def test_identity_takes_leading_eight_bytes():
    assert compute_bytes("identity", bytes([1, 2, 3, 4, 5])) == 0x0102030405  # BMv2 HashTest.Identity
    assert compute_bytes("identity", bytes(range(1, 14))) == 0x0102030405060708


# --- field list serialisation -----------------------------------------------------------------

def test_pack_fields_non_aligned_bmv2_vectors():
    # BMv2 CalculationTest.Extra: f6=0x3d, f8=0x3e, f9=1, f9=0 -> identity 0xf4f80200
    assert compute("identity", [(0x3D, 6), (0x3E, 8), (1, 9), (0, 9)]) == 0xF4F80200
    # BMv2 CalculationTest.WithConstantNonAligned: 4 zero bits, 0xffff, 12-bit 0x9fd
    assert compute("identity", [(0, 4), (0xFFFF, 16), (0x9FD, 12)]) == 0x0FFFF9FD


def test_pack_fields_pads_zero_bits_at_the_end():
    assert pack_fields([(0xA, 4)]) == b"\xa0"
    assert pack_fields([(1, 1), (1, 1)]) == b"\xc0"
    assert pack_fields([(0x1FF, 9)]) == b"\xff\x80"
    assert pack_fields([]) == b""
    assert pack_fields([(5, 0), (0xAB, 8)]) == b"\xab"


def test_pack_fields_masks_values_and_signed_twos_complement():
    assert pack_fields([(0x1FF, 8)]) == b"\xff"
    assert pack_fields([(-1, 8), (-2, 8)]) == b"\xff\xfe"
    with pytest.raises(ParameterError):
        pack_fields([(1, -1)])


def test_five_tuple_with_protocol_byte():
    five_tuple = [(0x0A000001, 32), (0x0A000102, 32), (6, 8), (12345, 16), (80, 16)]
    data = pack_fields(five_tuple)
    assert data == bytes.fromhex("0a000001" "0a000102" "06" "3039" "0050")
    for algorithm in ("crc16", "crc32", "csum16", "xor16", "identity"):
        assert compute(algorithm, five_tuple) == compute_bytes(algorithm, data)
    assert compute("identity", five_tuple) == 0x0A0000010A000102


def test_non_byte_aligned_list_hash_differs_from_right_aligned_value():
    # bit<4> 0x3 hashes as the byte 0x30 (padding at the end), not as 0x03.
    assert compute("crc16", [(0x3, 4)]) == compute_bytes("crc16", b"\x30")
    assert compute("crc16", [(0x3, 4)]) != compute_bytes("crc16", b"\x03")


# --- hash() extern ----------------------------------------------------------------------------

def test_hash_extern_base_plus_modulo():
    fields = [(0x0A000001, 32), (0x0A000102, 32), (6, 8), (12345, 16), (80, 16)]
    raw = compute("crc16", fields)
    assert hash_extern("crc16", 0, fields, 4, 16) == raw % 4
    assert hash_extern("crc16", 100, fields, 7, 16) == 100 + raw % 7
    assert hash_extern("crc32", 0, fields, 1 << 32, 32) == compute("crc32", fields)


def test_hash_extern_max_zero_gives_base():
    fields = [(0xDEADBEEF, 32)]
    for algorithm in ("crc16", "crc32", "identity", "csum16", "xor16", "random"):
        assert hash_extern(algorithm, 5, fields, 0, 16) == 5


def test_hash_extern_truncates_to_output_width():
    # identity of a 32-bit value into bit<16> with max 2**16 keeps the low 16 bits.
    assert hash_extern("identity", 0, [(0x12345678, 32)], 1 << 16, 16) == 0x5678
    # identity into bit<8> with a max wider than the output: the sum wraps at the output width.
    assert hash_extern("identity", 0, [(0x12345678, 32)], 1 << 32, 8) == 0x78
    assert hash_extern("identity", 0xFF, [(0x01, 8)], 256, 8) == 0x00


def test_random_is_seeded_and_in_range():
    rng_a, rng_b = random.Random(42), random.Random(42)
    values_a = [hash_extern("random", 10, [(1, 8)], 6, 16, rng=rng_a) for _ in range(200)]
    values_b = [hash_extern("random", 10, [(1, 8)], 6, 16, rng=rng_b) for _ in range(200)]
    assert values_a == values_b
    assert set(values_a) == set(range(10, 16))
    hashes.seed_random(1)
    first = [compute("random", []) for _ in range(3)]
    hashes.seed_random(1)
    assert [compute("random", []) for _ in range(3)] == first


def test_unknown_algorithm_names_the_allowed_ones():
    with pytest.raises(ParameterError, match="crc32_custom"):
        compute("md5", [(1, 8)])


def test_every_enum_member_is_supported():
    assert ALGORITHMS == ("crc32", "crc32_custom", "crc16", "crc16_custom", "random",
                          "identity", "csum16", "xor16")
    for algorithm in ALGORITHMS:
        value = compute(algorithm, [(0x1234, 16), (5, 3)])
        assert value >= 0
    assert CRC16_PARAMS.width == 16 and CRC32_PARAMS.width == 32

"""v1model hash and checksum algorithms, computed bit-for-bit as BMv2 computes them.

The v1model ``HashAlgorithm`` enum names (``crc32``, ``crc32_custom``, ``crc16``,
``crc16_custom``, ``random``, ``identity``, ``csum16``, ``xor16``) map to the BMv2
calculations of the same name (p4c's BMv2 backend passes the enum member name
through unchanged).  What BMv2 does, and therefore what this module does
(source: p4lang/behavioral-model ``src/bm_sim/calculations.cpp``, checked against
the vectors in ``tests/test_calculations.cpp``):

Serialising the field list (``BufBuilder``)
    The fields are concatenated bit-wise, most significant bit first, in list
    order, with no per-field alignment; the buffer is then ``ceil(bits / 8)``
    bytes long, so a list whose total width is not a multiple of 8 is padded
    with zero bits at the *end* (the least significant bits of the last byte).
    Example: ``{bit<4> 0xA}`` serialises to ``b"\\xa0"``, so ``identity`` of it
    is 0xA0.  Fields of headers that are not valid are skipped by BMv2; the
    caller must leave them out of ``fields``.  Signed (``int<W>``) values are
    taken in two's complement; a ``varbit`` contributes its current width.

``crc16``
    CRC-16/ARC: polynomial 0x8005, init 0x0000, input and output reflected,
    final xor 0x0000.  Check value ("123456789") 0xBB3D.
``crc32``
    CRC-32/ISO-HDLC (the zlib/Ethernet CRC): polynomial 0x04C11DB7, init
    0xFFFFFFFF, input and output reflected, final xor 0xFFFFFFFF.  Check value
    0xCBF43926.
``crc16_custom`` / ``crc32_custom``
    The Rocksoft-model CRC with a per-calculation configuration
    (polynomial, initial_remainder, final_xor_value, data_reflected,
    remainder_reflected).  BMv2's defaults equal ``crc16`` and ``crc32``
    above; BMv2 lets the control plane change them per calculation (its Thrift
    ``set_crc16_custom_parameters``), which here is the ``crc_params`` argument.
    ``initial_remainder`` is the register value before the first byte in
    MSB-first form (not reflected), as in BMv2.
``csum16``
    The Internet checksum (RFC 1071): ones'-complement of the ones'-complement
    sum of the buffer as big-endian 16-bit words, an odd trailing byte padded
    with a zero byte; the result is the value as it appears in the header field
    (IPv4 header checksum when computed over the header with checksum 0).
``xor16``
    XOR of the buffer as big-endian 16-bit words, an odd trailing byte padded
    with a zero byte after it.
``identity``
    The first ``min(8, len)`` bytes of the buffer read as a big-endian integer
    (so a field list wider than 64 bits keeps its *leading* 64 bits).
``random``
    BMv2's calculations.cpp registers no ``random`` calculation, so there is no
    BMv2 behaviour to copy for the hash algorithm.  Here it is a uniformly
    random 64-bit value that ignores the data, drawn from a seeded
    ``random.Random`` (``seed_random`` / the ``rng`` argument) so runs are
    reproducible.

``hash(out O result, HashAlgorithm algo, T base, D data, M max)``
    BMv2 (``modify_field_with_hash_based_offset`` in
    ``targets/simple_switch/primitives.cpp``) computes
    ``(H % max) + base`` in 64-bit unsigned arithmetic, treating ``max == 0``
    as 1 (so the result is ``base``, as v1model.p4 documents), and stores it into
    ``result``, which truncates it to the width of O.

Checksum externs (``verify_checksum`` / ``update_checksum``)
    BMv2's ``CalcBasedChecksum`` runs the named calculation over the field
    list (plus the unparsed payload for the ``*_with_payload`` variants);
    update writes the value truncated to the checksum field's width; verify
    compares the untruncated calculation output with the field value.
"""

import random as _random
import struct
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Optional, Sequence, Tuple

from testbed.errors import ParameterError

__all__ = [
    "ALGORITHMS",
    "CRC16_PARAMS",
    "CRC32_PARAMS",
    "CrcParams",
    "Crc",
    "checksum16",
    "compute",
    "compute_bytes",
    "csum16",
    "hash_extern",
    "identity",
    "pack_fields",
    "seed_random",
    "xor16",
]

#: The v1model HashAlgorithm enum members, in declaration order.
ALGORITHMS = ("crc32", "crc32_custom", "crc16", "crc16_custom", "random",
              "identity", "csum16", "xor16")

_UINT64_MASK = (1 << 64) - 1

Field = Tuple[int, int]


@dataclass(frozen=True)
class CrcParams:
    """Configuration of a BMv2 custom CRC (``crc_config_t``).

    Attributes:
        width: register width in bits (16 for crc16_custom, 32 for crc32_custom).
        polynomial: generator polynomial without its top bit (0x8005, 0x04C11DB7).
        initial_remainder: register value before the first byte, MSB-first form.
        final_xor_value: value XORed into the (possibly reflected) register at the end.
        data_reflected: reflect each input byte before it enters the register.
        remainder_reflected: reflect the whole register before the final XOR.
    """

    width: int
    polynomial: int
    initial_remainder: int
    final_xor_value: int
    data_reflected: bool
    remainder_reflected: bool


#: BMv2's ``crc16`` and the default of ``crc16_custom`` (CRC-16/ARC).
CRC16_PARAMS = CrcParams(16, 0x8005, 0x0000, 0x0000, True, True)
#: BMv2's ``crc32`` and the default of ``crc32_custom`` (CRC-32/ISO-HDLC).
CRC32_PARAMS = CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)


def _reflect(value: int, nbits: int) -> int:
    """Return ``value``'s low ``nbits`` bits in reverse order."""
    result = 0
    for _ in range(nbits):
        result = (result << 1) | (value & 1)
        value >>= 1
    return result


_REFLECT8 = bytes(_reflect(b, 8) for b in range(256))


class Crc:
    """A table-driven CRC with BMv2 ``crc_custom`` semantics.

    The table is built once, at construction.  When both reflections are on
    (every standard CRC BMv2 ships) the CRC runs LSB-first on a reflected table,
    which gives the same result as BMv2's MSB-first loop on reflected bytes;
    the mixed cases run MSB-first exactly as BMv2 does.

    Args:
        params: the CRC configuration.

    Raises:
        ParameterError: if the width is not a multiple of 8 in 8..64 or a value
            does not fit in the width.
    """

    def __init__(self, params: CrcParams):
        width = params.width
        if width not in (8, 16, 32, 64):
            raise ParameterError("crc width", width, "8, 16, 32 or 64")
        mask = (1 << width) - 1
        for name in ("polynomial", "initial_remainder", "final_xor_value"):
            value = getattr(params, name)
            if not 0 <= value <= mask:
                raise ParameterError(name, value, f"an integer in 0..{mask:#x} (a {width}-bit value)")
        self.params = params
        self._mask = mask
        self._reflected = params.data_reflected and params.remainder_reflected
        top = 1 << (width - 1)
        msb_table = []
        for dividend in range(256):
            remainder = dividend << (width - 8)
            for _ in range(8):
                remainder = ((remainder << 1) ^ params.polynomial) if remainder & top else (remainder << 1)
            msb_table.append(remainder & mask)
        if self._reflected:
            # Reflected table: entry i is reflect(msb_table[reflect8(i)]).
            self._table = tuple(_reflect(msb_table[_REFLECT8[i]], width) for i in range(256))
            self._init = _reflect(params.initial_remainder, width)
        else:
            self._table = tuple(msb_table)
            self._init = params.initial_remainder
        self._shift = width - 8

    def __call__(self, data: bytes) -> int:
        """Return the CRC of ``data``.

        Args:
            data: the serialised field list.

        Returns:
            The CRC as an unsigned integer of ``params.width`` bits.
        """
        table = self._table
        register = self._init
        if self._reflected:
            for byte in data:
                register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
            return register ^ self.params.final_xor_value
        shift, mask = self._shift, self._mask
        if self.params.data_reflected:
            data = data.translate(_REFLECT8)
        for byte in data:
            register = table[((register >> shift) ^ byte) & 0xFF] ^ ((register << 8) & mask)
        if self.params.remainder_reflected:
            register = _reflect(register, self.params.width)
        return register ^ self.params.final_xor_value


_CRC16 = Crc(CRC16_PARAMS)
# zlib.crc32 computes exactly CRC32_PARAMS (CRC-32/ISO-HDLC), in C; the tests
# check it against the table-driven Crc(CRC32_PARAMS).
_CRC_CACHE: Dict[CrcParams, Callable[[bytes], int]] = {CRC16_PARAMS: _CRC16, CRC32_PARAMS: zlib.crc32}


def _crc_for(params: CrcParams) -> Callable[[bytes], int]:
    """Return the (cached) CRC function for ``params``."""
    crc = _CRC_CACHE.get(params)
    if crc is None:
        crc = Crc(params)
        if len(_CRC_CACHE) < 256:
            _CRC_CACHE[params] = crc
    return crc


def csum16(data: bytes) -> int:
    """Return the Internet checksum (RFC 1071) of ``data`` as BMv2's csum16 does.

    Args:
        data: the bytes; an odd length is padded with one zero byte.

    Returns:
        The 16-bit ones'-complement of the ones'-complement sum of the
        big-endian 16-bit words, the value the checksum field must hold.
    """
    if len(data) & 1:
        data += b"\x00"
    number = int.from_bytes(data, "big")
    # 2**16 == 1 (mod 0xFFFF), so the end-around-carry sum of the words is the
    # number modulo 0xFFFF, except that a nonzero multiple sums to 0xFFFF.
    total = number % 0xFFFF
    if total == 0 and number:
        total = 0xFFFF
    return ~total & 0xFFFF


def xor16(data: bytes) -> int:
    """Return the XOR of ``data``'s big-endian 16-bit words (BMv2 ``xor16``).

    Args:
        data: the bytes; an odd trailing byte is the high byte of a last word.

    Returns:
        A 16-bit unsigned integer.
    """
    if len(data) & 1:
        data += b"\x00"
    result = 0
    for (word,) in struct.iter_unpack(">H", data):
        result ^= word
    return result


def identity(data: bytes) -> int:
    """Return the first ``min(8, len(data))`` bytes as a big-endian integer (BMv2 ``identity``)."""
    return int.from_bytes(data[:8], "big")


_RANDOM = _random.Random(0)


def seed_random(seed) -> None:
    """Reseed the module's generator used by the ``random`` algorithm when no ``rng`` is given.

    Args:
        seed: any value ``random.Random.seed`` accepts.
    """
    _RANDOM.seed(seed)


def pack_fields(fields: Iterable[Field]) -> bytes:
    """Serialise a field list the way BMv2's BufBuilder does.

    Args:
        fields: ``(value, bitwidth)`` pairs in list order.  Values are masked
            to their width (two's complement for negative ``int<W>`` values);
            a width of 0 contributes nothing.

    Returns:
        The fields concatenated MSB-first with no alignment, zero-padded at the
        end to a whole number of bytes.

    Raises:
        ParameterError: if a width is negative.
    """
    accumulator = 0
    nbits = 0
    for value, width in fields:
        if width <= 0:
            if width == 0:
                continue
            raise ParameterError("field bitwidth", width, "an integer >= 0")
        accumulator = (accumulator << width) | (value & ((1 << width) - 1))
        nbits += width
    pad = -nbits % 8
    return (accumulator << pad).to_bytes((nbits + pad) >> 3, "big")


def _algorithm_error(algorithm) -> ParameterError:
    return ParameterError("hash algorithm", algorithm, "one of: " + ", ".join(ALGORITHMS))


def compute_bytes(algorithm: str, data: bytes, crc_params: Optional[CrcParams] = None,
                  rng: Optional[_random.Random] = None) -> int:
    """Return the raw hash of an already serialised buffer.

    Args:
        algorithm: a v1model HashAlgorithm member name (see ``ALGORITHMS``).
        data: the buffer (``pack_fields`` output, possibly followed by payload).
        crc_params: configuration for ``crc16_custom``/``crc32_custom``; None
            means BMv2's default (equal to ``crc16``/``crc32``).  Its width must
            match the algorithm.
        rng: generator for ``random``; None uses the module's seeded generator.

    Returns:
        The unsigned hash value: 16 bits for crc16/csum16/xor16 (and
        crc16_custom), 32 bits for crc32 (and crc32_custom), up to 64 bits for
        identity and random.

    Raises:
        ParameterError: for an unknown algorithm or crc_params of the wrong width.
    """
    if algorithm == "crc16":
        return _CRC16(data)
    if algorithm == "crc32":
        return zlib.crc32(data)
    if algorithm == "csum16":
        return csum16(data)
    if algorithm == "identity":
        return int.from_bytes(data[:8], "big")
    if algorithm == "xor16":
        return xor16(data)
    if algorithm == "crc16_custom" or algorithm == "crc32_custom":
        width = 16 if algorithm == "crc16_custom" else 32
        if crc_params is None:
            crc_params = CRC16_PARAMS if width == 16 else CRC32_PARAMS
        elif crc_params.width != width:
            raise ParameterError("crc_params.width", crc_params.width, str(width),
                                 reason=f"{algorithm} is a {width}-bit CRC")
        return _crc_for(crc_params)(data)
    if algorithm == "random":
        return (rng or _RANDOM).getrandbits(64)
    raise _algorithm_error(algorithm)


def compute(algorithm: str, fields: Sequence[Field], crc_params: Optional[CrcParams] = None,
            rng: Optional[_random.Random] = None) -> int:
    """Return the raw hash BMv2 computes over a field list.

    Args:
        algorithm: a v1model HashAlgorithm member name (see ``ALGORITHMS``).
        fields: ``(value, bitwidth)`` pairs in list order (fields of invalid
            headers left out, as BMv2 does).
        crc_params: configuration for the custom CRCs (see ``compute_bytes``).
        rng: generator for ``random`` (see ``compute_bytes``).

    Returns:
        The unsigned hash value (width as ``compute_bytes`` states).

    Raises:
        ParameterError: for an unknown algorithm, a negative width or
            crc_params of the wrong width.
    """
    return compute_bytes(algorithm, pack_fields(fields), crc_params, rng)


def hash_extern(algorithm: str, base: int, fields: Sequence[Field], max_value: int,
                output_width: int, crc_params: Optional[CrcParams] = None,
                rng: Optional[_random.Random] = None) -> int:
    """Return what v1model's ``hash(result, algo, base, data, max)`` writes to ``result``.

    BMv2 computes ``(H % max) + base`` in 64-bit unsigned arithmetic with
    ``max == 0`` treated as 1, then truncates to the result's width.

    Args:
        algorithm: a v1model HashAlgorithm member name.
        base: the ``base`` argument (an unsigned value).
        fields: the ``data`` field list as ``(value, bitwidth)`` pairs.
        max_value: the ``max`` argument (an unsigned value).
        output_width: the bit width W of ``result`` (bit<W>).
        crc_params: configuration for the custom CRCs.
        rng: generator for ``random``.

    Returns:
        The value of ``result``, in ``0 .. 2**output_width - 1``.

    Raises:
        ParameterError: for an unknown algorithm or a bad width.
    """
    if output_width < 0:
        raise ParameterError("output_width", output_width, "an integer >= 0")
    modulus = (max_value & _UINT64_MASK) or 1
    raw = compute(algorithm, fields, crc_params, rng)
    value = ((raw % modulus) + (base & _UINT64_MASK)) & _UINT64_MASK
    return value & ((1 << output_width) - 1)


def checksum16(fields: Sequence[Field], payload: bytes = b"") -> int:
    """Return the csum16 of a field list, for verify_checksum/update_checksum.

    Args:
        fields: ``(value, bitwidth)`` pairs (for IPv4: every header field but
            the checksum, in order).
        payload: bytes appended after the fields (the ``*_with_payload``
            externs pass the unparsed payload here).

    Returns:
        The 16-bit Internet checksum to store in (or compare with) the field.
    """
    data = pack_fields(fields)
    if payload:
        data += payload
    return csum16(data)

"""Settings of the root namespace's fabric interfaces, made by system calls instead of one command each.

A k=8 FatTree has 640 switch-side interfaces; running ``ethtool`` and
``sysctl`` for each costs seconds of process start-ups.  The same settings
are made here from Python:

* :func:`disable_offloads`: what ``ethtool -K IFACE rx off tx off sg off tso off
  gso off gro off lro off`` does: the kernel feature bits whose names match
  ethtool's patterns for those words (``off_flag_def`` in ethtool's common.c:
  ``rx-checksum``, ``tx-checksum-*``, ``tx-scatter-gather*``, ``tx-tcp*-segmentation``,
  ``tx-generic-segmentation``, ``rx-gro``, ``rx-lro``) are cleared with the
  ``SIOCETHTOOL`` ioctl's ``ETHTOOL_SFEATURES`` command, leaving the ones the
  device does not let anyone change.  Offloads make the kernel hand a
  raw-socket reader checksum-less or 64 KiB super-frames, which a software
  switch would forward as they are.
* :func:`disable_ipv6`: ``sysctl net.ipv6.conf.IFACE.disable_ipv6=1`` (no router
  solicitations or DAD probes in the counters and captures).
"""
import ctypes
import fcntl
import fnmatch
import functools
import socket
import struct

SIOCETHTOOL = 0x8946
IFREQ_SIZE = 40  # struct ifreq on 64-bit Linux: 16-byte name + 24-byte union
ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS, ETHTOOL_GFEATURES, ETHTOOL_SFEATURES = 0x37, 0x1b, 0x3a, 0x3b
ETH_SS_FEATURES = 4
ETH_GSTRING_LEN = 32
#: the feature-name patterns of ``ethtool -K ... rx off tx off sg off tso off gso off gro off lro off``
OFFLOAD_PATTERNS = ("rx-checksum", "tx-checksum-*", "tx-scatter-gather*", "tx-tcp*-segmentation",
                    "tx-generic-segmentation", "rx-gro", "rx-lro")


def _ioctl(sock, interface, request):
    """Run one SIOCETHTOOL ``request`` (bytes starting with the command) on ``interface``; return the buffer after."""
    buffer = ctypes.create_string_buffer(request, len(request))
    ifreq = struct.pack("16sP", interface.encode()[:15], ctypes.addressof(buffer))
    fcntl.ioctl(sock, SIOCETHTOOL, ifreq.ljust(IFREQ_SIZE, b"\0"))
    return buffer.raw


@functools.lru_cache(maxsize=1)
def _feature_names_of_kernel():
    """The kernel's feature names, by bit (the same for every device)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        info = _ioctl(sock, "lo", struct.pack("IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_FEATURES, 0))
        count = struct.unpack_from("I", info, 16)[0]
        raw = _ioctl(sock, "lo", struct.pack("III", ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count)
                     + bytes(count * ETH_GSTRING_LEN))[12:]
    return tuple(raw[i * ETH_GSTRING_LEN:(i + 1) * ETH_GSTRING_LEN].split(b"\0", 1)[0].decode()
                 for i in range(count))


def _offload_bits():
    names = _feature_names_of_kernel()
    return [bit for bit, name in enumerate(names) if any(fnmatch.fnmatchcase(name, p) for p in OFFLOAD_PATTERNS)]


def _features(sock, interface):
    """``(available, active)`` feature bitmaps of ``interface`` as ints."""
    blocks = (len(_feature_names_of_kernel()) + 31) // 32
    raw = _ioctl(sock, interface, struct.pack("II", ETHTOOL_GFEATURES, blocks) + bytes(16 * blocks))
    available = active = 0
    for block in range(blocks):
        block_available, _requested, block_active, _never = struct.unpack_from("IIII", raw, 8 + 16 * block)
        available |= block_available << (32 * block)
        active |= block_active << (32 * block)
    return available, active


def offloads(interface):
    """``{feature name: on}`` of the features :func:`disable_offloads` turns off.

    Raises:
        OSError: no such interface.
    """
    names = _feature_names_of_kernel()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        _available, active = _features(sock, interface)
    return {names[bit]: bool(active >> bit & 1) for bit in _offload_bits()}


def disable_offloads(interface):
    """Turn off rx/tx checksumming, scatter-gather, TSO, GSO, GRO and LRO on ``interface`` (``ethtool -K``).

    Features the device does not let anyone change are left as they are.

    Raises:
        OSError: no such interface, or no privilege.
    """
    blocks = (len(_feature_names_of_kernel()) + 31) // 32
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        available, _active = _features(sock, interface)
        valid = sum(1 << bit for bit in _offload_bits()) & available
        request = struct.pack("II", ETHTOOL_SFEATURES, blocks) + b"".join(
            struct.pack("II", valid >> (32 * block) & 0xFFFFFFFF, 0) for block in range(blocks))
        _ioctl(sock, interface, request)


def disable_ipv6(interface):
    """Set ``net.ipv6.conf.<interface>.disable_ipv6`` to 1 in this namespace; False if IPv6 is not there."""
    try:
        with open(f"/proc/sys/net/ipv6/conf/{interface}/disable_ipv6", "w") as handle:
            handle.write("1")
    except FileNotFoundError:
        return False
    return True

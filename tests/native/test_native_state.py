"""A table's native copy is patched write by write (testbed/p4/native/state.py) and equals a full load.

Seeded random inserts, modifies, deletes, default changes and resets, synced in batches of random
size, on tables of each lookup mode (exact, lpm, ternary with priorities and a range key, direct
counters): after every sync the arrays the table was loaded from, and its entries' load order, are
those a load of the whole table gives.  That the native lookups on such arrays equal the Python
target's is the differential test's (tests/native/test_native_differential.py, whose scripts write
between batches too).
"""
import random

import pytest

from testbed.p4.loader import load_program
from testbed.p4.native import make_device
from testbed.p4.native.build import compiler
from testbed.p4.native.state import _LoadedTable
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4.state.tables import StateError

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<32> a; bit<16> b; }
struct headers_t { h_t h; }
struct meta_t { bit<8> unused; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    direct_counter(CounterType.packets_and_bytes) hits;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action fwd_counted(bit<9> port) { sm.egress_spec = port; hits.count(); }
    table exact_t { key = { hdr.h.a : exact; } actions = { fwd; NoAction; } size = 4096; }
    table lpm_t { key = { hdr.h.a : lpm; } actions = { fwd; NoAction; } size = 4096; }
    table ternary_t { key = { hdr.h.a : ternary; hdr.h.b : range; } actions = { fwd; NoAction; } size = 4096; }
    table counted_t { key = { hdr.h.b : exact; } actions = { fwd_counted; } counters = hits; size = 4096; }
    apply { exact_t.apply(); lpm_t.apply(); ternary_t.apply(); counted_t.apply(); }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def _matches(name, rng):
    if name == "I.exact_t":
        return [KeyMatch("exact", rng.randrange(64))], None
    if name == "I.lpm_t":
        length = rng.choice([0, 8, 16, 24, 32])
        return [KeyMatch("lpm", rng.randrange(1 << 32) & ~((1 << (32 - length)) - 1) & 0xffffffff,
                         prefix_len=length)], None
    if name == "I.ternary_t":
        mask = rng.choice([0, 0xff000000, 0xffffffff])
        low = rng.randrange(1 << 16)
        high = rng.choice([low, min(0xffff, low + rng.randrange(100))])
        return [KeyMatch("ternary", rng.randrange(1 << 32) & mask, mask=mask),
                KeyMatch("range", low, high=high)], rng.randrange(1, 4)
    return [KeyMatch("exact", rng.randrange(64))], None


def _action(name, rng):
    return ActionCall("I.fwd_counted" if name == "I.counted_t" else "I.fwd", (rng.randrange(1, 500),))


def _full_load(native, index, table):
    full = _LoadedTable(len(table.info.match_keys), native.library.layout["table_nargs"][index])
    lpm_pos = table._kinds.index("lpm") if table._mode == "lpm" else None
    for entry in table._entries.values():
        full.put(entry, native._row(table, entry, full.sizes[-1] // 8, lpm_pos, "test"), in_order=True)
    return full


@pytest.mark.parametrize("seed", range(4))
def test_patched_tables_equal_a_full_load(tmp_path, seed):
    path = tmp_path / "tables.p4"
    path.write_text(PROGRAM)
    program = load_program(str(path))
    state = SwitchState(program.info)
    native = make_device(program, state, backend="native").native
    rng = random.Random(seed)
    written = {name: [] for name in ("I.exact_t", "I.lpm_t", "I.ternary_t", "I.counted_t")}
    for _ in range(60):
        for _ in range(rng.choice([1, 1, 2, 5, 20])):
            name = rng.choice(sorted(written))
            table, entries = state.tables[name], written[name]
            what = rng.random()
            try:
                if what < 0.6 or not entries:
                    matches, priority = _matches(name, rng)
                    entries.append(table.insert(TableEntry(matches, _action(name, rng), priority=priority)))
                elif what < 0.75:
                    old = rng.choice(entries)
                    table.modify(TableEntry(old.matches, _action(name, rng), priority=old.priority))
                elif what < 0.95:
                    old = entries.pop(rng.randrange(len(entries)))
                    table.delete(TableEntry(old.matches, priority=old.priority))
                elif what < 0.98:
                    table.set_default(ActionCall("NoAction") if name != "I.counted_t" else _action(name, rng))
                else:
                    table.reset()
                    entries.clear()
            except StateError as error:
                assert error.code in ("ALREADY_EXISTS", "NOT_FOUND", "INVALID_ARGUMENT"), error
        native.sync()
        for name, (index, table) in native.tables.items():
            loaded, full = native._tables_loaded[name], _full_load(native, index, table)
            assert loaded.entries == full.entries and all(a is b for a, b in zip(loaded.entries, full.entries))
            assert loaded.columns == full.columns, name
    assert sum(len(state.tables[name]._entries) for name in written) > 20


def test_an_insert_seen_after_a_later_one_reloads_the_table(tmp_path):
    """Two writers whose notifications come in the other order: the table is loaded anew, in insertion order."""
    path = tmp_path / "tables.p4"
    path.write_text(PROGRAM)
    program = load_program(str(path))
    state = SwitchState(program.info)
    native = make_device(program, state, backend="native").native
    table = state.tables["I.exact_t"]
    watcher = native._table_changed
    table.watchers.remove(watcher)
    first = table.insert(TableEntry([KeyMatch("exact", 1)], ActionCall("I.fwd", (1,))))
    second = table.insert(TableEntry([KeyMatch("exact", 2)], ActionCall("I.fwd", (2,))))
    table.watchers.append(watcher)
    watcher(table, "insert", second)
    native.sync()
    watcher(table, "insert", first)
    native.sync()
    assert native._tables_loaded["I.exact_t"].entries == [first, second]


def test_sync_reads_the_state_before_it_holds_the_loop(tmp_path):
    """A writer holding a table's lock keeps the sync waiting before it takes ``hold`` (the packet loop's
    lock), never while it holds it: the loop waits for the copy only."""
    import contextlib
    import threading

    path = tmp_path / "tables.p4"
    path.write_text(PROGRAM)
    program = load_program(str(path))
    state = SwitchState(program.info)
    native = make_device(program, state, backend="native").native
    table = state.tables["I.exact_t"]
    entry = table.insert(TableEntry([KeyMatch("exact", 7)], ActionCall("I.fwd", (3,))))
    held = threading.Event()

    @contextlib.contextmanager
    def hold():
        held.set()
        yield

    with table._lock:  # a writer in the middle of a write
        syncing = threading.Thread(target=native.sync, kwargs={"hold": hold})
        syncing.start()
        syncing.join(0.3)
        assert syncing.is_alive() and not held.is_set()
    syncing.join(10)
    assert held.is_set() and not syncing.is_alive()
    assert native._tables_loaded["I.exact_t"].entries == [entry]

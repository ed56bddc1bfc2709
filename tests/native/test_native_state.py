"""A table's native copy is patched write by write (testbed/p4/native/state.py) and equals a full load.

Seeded random inserts, modifies, deletes, default changes and resets, synced in batches of random
size, on tables of each lookup mode (exact, lpm, ternary with priorities and a range key, direct
counters): after every sync the arrays the table was loaded from, and its entries' load order, are
those a load of the whole table gives; and frames looked up in every table after every batch leave
the native device as they leave the Python one (the lookup structures, added to and changed in place
in C between whole loads, find what the Python target finds).
"""
import random
import struct

import pytest

from testbed.p4.loader import load_program
from testbed.p4.native import make_device
from testbed.p4.native.build import compiler
from testbed.p4.native.state import _LoadedTable
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4.state.tables import StateError

from p4runtime_helpers import small_program

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

PROGRAM = small_program("""
    direct_counter(CounterType.packets_and_bytes) hits;
    action set1(bit<16> v) { hdr.h.r1 = v; }
    action set2(bit<16> v) { hdr.h.r2 = v; }
    action set3(bit<16> v) { hdr.h.r3 = v; }
    action set4(bit<16> v) { hdr.h.r4 = v; hits.count(); }
    table exact_t { key = { hdr.h.a : exact; } actions = { set1; NoAction; } size = 4096; }
    table lpm_t { key = { hdr.h.a : lpm; } actions = { set2; NoAction; } size = 4096; }
    table ternary_t { key = { hdr.h.a : ternary; hdr.h.b : range; } actions = { set3; NoAction; } size = 4096; }
    table counted_t { key = { hdr.h.b : exact; } actions = { set4; } counters = hits; size = 4096; }
    apply {
        sm.egress_spec = 1;
        exact_t.apply(); lpm_t.apply(); ternary_t.apply(); counted_t.apply();
    }""", fields="bit<32> a; bit<16> b; bit<16> r1; bit<16> r2; bit<16> r3; bit<16> r4;")


TABLES = ("I.exact_t", "I.lpm_t", "I.ternary_t", "I.counted_t")


def _key(rng):
    """A key value of the test's small key space (so that frames hit entries)."""
    return rng.choice([0, 0x0a000000]) | rng.randrange(64)


def _matches(name, rng):
    if name == "I.exact_t":
        return [KeyMatch("exact", _key(rng))], None
    if name == "I.lpm_t":
        length = rng.choice([0, 8, 16, 24, 26, 32])
        return [KeyMatch("lpm", _key(rng) & ~((1 << (32 - length)) - 1) & 0xffffffff, prefix_len=length)], None
    if name == "I.ternary_t":
        mask = rng.choice([0, 0xff000000, 0xfffffff0, 0xffffffff])
        low = rng.randrange(64)
        high = rng.choice([low, low + rng.randrange(20)])
        return [KeyMatch("ternary", _key(rng) & mask, mask=mask), KeyMatch("range", low, high=high)], \
            rng.randrange(1, 9)
    return [KeyMatch("exact", rng.randrange(64))], None


def _action(name, rng):
    return ActionCall(f"I.set{TABLES.index(name) + 1}", (rng.randrange(1, 500),))


def _random_write(tables, name, written, rng):
    """One seeded write to table ``name`` of each of ``tables`` (the same write to each; ``written``: the
    entries the first one holds, kept up to date)."""
    what = rng.random()
    entries = written[name]
    try:
        if what < 0.6 or not entries:
            matches, priority = _matches(name, rng)
            entry = TableEntry(matches, _action(name, rng), priority=priority)
            entries.append([table.insert(entry) for table in tables][0])
        elif what < 0.75:
            old = rng.choice(entries)
            change = TableEntry(old.matches, _action(name, rng), priority=old.priority)
            for table in tables:
                table.modify(change)
        elif what < 0.95:
            old = entries.pop(rng.randrange(len(entries)))
            for table in tables:
                table.delete(TableEntry(old.matches, priority=old.priority))
        elif what < 0.98:
            call = ActionCall("NoAction") if name != "I.counted_t" else _action(name, rng)
            for table in tables:
                table.set_default(call)
        else:
            for table in tables:
                table.reset()
            entries.clear()
    except StateError as error:
        assert error.code in ("ALREADY_EXISTS", "NOT_FOUND", "INVALID_ARGUMENT"), error


def _program(tmp_path):
    path = tmp_path / "tables.p4"
    path.write_text(PROGRAM)
    return load_program(str(path))


def _full_load(native, index, table):
    full = _LoadedTable(len(table.info.match_keys), native.library.layout["table_nargs"][index])
    lpm_pos = table._kinds.index("lpm") if table._mode == "lpm" else None
    for entry in table._entries.values():
        full.put(entry, native._row(table, entry, full.sizes[-1] // 8, lpm_pos, "test"), in_order=True)
    return full


@pytest.mark.parametrize("seed", range(4))
def test_patched_tables_equal_a_full_load(tmp_path, seed):
    program = _program(tmp_path)
    state = SwitchState(program.info)
    native = make_device(program, state, backend="native").native
    rng = random.Random(seed)
    written = {name: [] for name in TABLES}
    for _ in range(60):
        for _ in range(rng.choice([1, 1, 2, 5, 20])):
            name = rng.choice(TABLES)
            _random_write([state.tables[name]], name, written, rng)
        native.sync()
        for name, (index, table) in native.tables.items():
            loaded, full = native._tables_loaded[name], _full_load(native, index, table)
            assert loaded.entries == full.entries and all(a is b for a, b in zip(loaded.entries, full.entries))
            assert loaded.columns == full.columns, name
    assert sum(len(state.tables[name]._entries) for name in written) > 20


@pytest.mark.parametrize("seed", range(3))
def test_patched_tables_look_up_as_the_python_target(tmp_path, seed):
    """Both backends take the same writes; after each batch of writes, frames over the key space leave
    both alike (every table's action writes a field of its own)."""
    program = _program(tmp_path)
    states = [SwitchState(program.info) for _ in range(2)]
    devices = [make_device(program, state, backend=backend) for state, backend in zip(states, ("python", "native"))]
    rng = random.Random(seed)
    written = {name: [] for name in TABLES}
    most = 0
    for batch in range(80):
        for _ in range(rng.choice([1, 1, 3, 10, 40])):
            name = rng.choice(TABLES)
            _random_write([state.tables[name] for state in states], name, written, rng)
        for _ in range(30):
            frame = struct.pack("!IH", _key(rng), rng.randrange(80)) + bytes(8) + bytes(rng.randrange(20))
            expected = devices[0].process(1, frame)
            assert devices[1].process(1, frame) == expected, (batch, frame.hex())
        most = max(most, sum(len(states[0].tables[name]._entries) for name in TABLES))
    assert most > 40


def test_an_added_entry_that_raises_its_masks_best_priority_is_found_first(tmp_path):
    """Lookups search the mask levels by their best priority and stop below the best hit: an entry added in
    place that raises its level's best priority must move the level ahead (else the lookup stops early)."""
    program = _program(tmp_path)
    states = [SwitchState(program.info) for _ in range(2)]
    devices = [make_device(program, state, backend=backend) for state, backend in zip(states, ("python", "native"))]
    key = 0x0a000005
    frame = struct.pack("!IH", key, 7) + bytes(8)
    outputs = []
    for value, mask, priority in ((0x0a000000, 0xff000000, 2), (0x0b000001, 0xffffffff, 1),
                                  (0x0a000000, 0xfffffff0, 1), (0x0a000000, 0xfffffff0, 5)):
        matches = [KeyMatch("ternary", value, mask=mask), KeyMatch("range", 7, high=7)]
        for state in states:
            state.tables["I.ternary_t"].insert(TableEntry(matches, ActionCall("I.set3", (priority,)),
                                                          priority=priority))
        outputs.append([device.process(1, frame) for device in devices])
    assert all(native == python for python, native in outputs), outputs
    assert outputs[-1][0] != outputs[-2][0]  # the priority 5 entry answers


def test_deletes_change_the_native_table_in_place(tmp_path):
    """A delete takes its entry out of native memory without loading the table again: lookups then find
    what the Python target finds, the lower-priority entry of the same masked key and the entries after
    it in load order included."""
    program = _program(tmp_path)
    states = [SwitchState(program.info) for _ in range(2)]
    devices = [make_device(program, state, backend=backend) for state, backend in zip(states, ("python", "native"))]
    native = devices[1].native
    library, loads = native.lib, []

    class CountingLoads:
        def __getattr__(self, name):
            call = getattr(library, name)
            return (lambda *args: loads.append(args) or call(*args)) if name == "tb_table_load" else call
    native.lib = CountingLoads()

    def entry(value, priority, low=7, high=7):
        return TableEntry([KeyMatch("ternary", value, mask=0xfffffff0), KeyMatch("range", low, high=high)],
                          ActionCall("I.set3", (priority,)), priority=priority)
    frames = [struct.pack("!IH", key, b) + bytes(8) for key in (0x0a000005, 0x0a000015) for b in (7, 9)]

    def outputs():
        return [[device.process(1, frame) for frame in frames] for device in devices]
    for state in states:
        for value, priority, low, high in ((0x0a000000, 5, 7, 7), (0x0a000000, 2, 7, 7), (0x0a000010, 4, 7, 7),
                                           (0x0a000000, 3, 0, 20), (0x0a000010, 1, 9, 9)):
            state.tables["I.ternary_t"].insert(entry(value, priority, low, high))
    python, first = outputs()
    assert python == first
    loads.clear()
    for doomed in (entry(0x0a000000, 5), entry(0x0a000000, 3, 0, 20), entry(0x0a000010, 4)):
        for state in states:
            state.tables["I.ternary_t"].delete(doomed)
        python, patched = outputs()
        assert patched == python and patched != first
    assert loads == []  # no table was loaded whole
    assert native._tables_loaded["I.ternary_t"].in_native == 2


def test_an_insert_seen_after_a_later_one_reloads_the_table(tmp_path):
    """Two writers whose notifications come in the other order: the table is loaded anew, in insertion order."""
    program = _program(tmp_path)
    state = SwitchState(program.info)
    native = make_device(program, state, backend="native").native
    table = state.tables["I.exact_t"]
    watcher = native._table_changed
    table.watchers.remove(watcher)
    first = table.insert(TableEntry([KeyMatch("exact", 1)], ActionCall("I.set1", (1,))))
    second = table.insert(TableEntry([KeyMatch("exact", 2)], ActionCall("I.set1", (2,))))
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

    program = _program(tmp_path)
    state = SwitchState(program.info)
    native = make_device(program, state, backend="native").native
    table = state.tables["I.exact_t"]
    entry = table.insert(TableEntry([KeyMatch("exact", 7)], ActionCall("I.set1", (3,))))
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


def test_a_long_run_of_deletes_keeps_positions_right(tmp_path):
    """Inserts and deletes churning far past the point where the loaded table numbers its entries anew
    (its removed numbers kept short): positions stay right, lookups stay the Python target's."""
    program = _program(tmp_path)
    states = [SwitchState(program.info) for _ in range(2)]
    devices = [make_device(program, state, backend=backend) for state, backend in zip(states, ("python", "native"))]
    native = devices[1].native
    rng = random.Random(5)

    def entry(key, value=0):
        return TableEntry([KeyMatch("exact", key)], ActionCall("I.set1", (value,)))
    for key in range(40):
        for state in states:
            state.tables["I.exact_t"].insert(entry(key, key + 1))
    live, next_key = list(range(40)), 40
    for step in range(1500):
        doomed = live.pop(rng.randrange(len(live)))
        for state in states:
            state.tables["I.exact_t"].delete(entry(doomed))
            state.tables["I.exact_t"].insert(entry(next_key, next_key % 500 + 1))
        live.append(next_key)
        next_key += 1
        if step % 50 == 0:
            frames = [struct.pack("!IH", rng.choice(live + [doomed]), 0) + bytes(8) for _ in range(10)]
            assert [devices[1].process(1, f) for f in frames] == [devices[0].process(1, f) for f in frames], step
    loaded = native._tables_loaded["I.exact_t"]
    assert len(loaded.gone) <= len(loaded.entries) + 1024
    assert [loaded.position(e) for e in loaded.entries] == list(range(len(loaded.entries)))

"""The GPU's launch hook, run here without a GPU: numba-cuda's CUDADispatcher.call replaced by a
function that only counts, and the hooks told they are on a GPU while they install. This is the
recorder's hot path (kernellab bench 07 times it on the H200); here it is checked for what it
hands the subscribers and what a Timeline notes from it."""

import types

import pytest

import kernellab  # noqa: F401
from kernellab.gpu import device, hooks, timeline

pytestmark = pytest.mark.usefixtures("hot_path")   # each test on the compiled hot path and on the Python one


class HandleStream:
    """Like numba-cuda's streams on a GPU: an object with a driver handle."""

    def __init__(self, handle):
        self.handle = handle


@pytest.fixture
def gpu_launch_hook(monkeypatch):
    """call(dispatcher, args, config) through the GPU branch of the launch hook; the list of what
    reached numba-cuda's (replaced) launch."""
    from numba.cuda.dispatcher import CUDADispatcher
    ran = []
    monkeypatch.setattr(CUDADispatcher, "call", lambda dispatcher, args, config: ran.append(args) or "done",
                        raising=False)   # the simulator's dispatcher class has none: the hook wraps what is there
    real_install = hooks._install
    monkeypatch.setattr(hooks, "_install",
                        lambda op: real_install(op) if op == hooks.LAUNCH else (lambda: None))
    real_is_simulator = device.is_simulator
    installing = {"gpu": True}
    monkeypatch.setattr(device, "is_simulator", lambda: not installing["gpu"] and real_is_simulator())
    kernel = types.SimpleNamespace(py_func=types.SimpleNamespace(__name__="busy_kernel"),
                                   targetoptions={"debug": False})

    def launch(stream, grid=(3, 1, 1), block=(64, 1, 1), args=(1, 2)):
        config = types.SimpleNamespace(griddim=grid, blockdim=block, stream=stream, sharedmem=128)
        return CUDADispatcher.call(kernel, args, config)
    return launch, ran, kernel


def test_a_subscriber_reads_the_launch_as_a_kernel_launch(gpu_launch_hook):
    launch, ran, kernel = gpu_launch_hook
    seen = []

    def around(proceed, k):
        seen.append((k.kernel, k.name, k.args, k.grid, k.block, k.stream, k.shared, k.debug, k.captured,
                     k.recorded()))
        return proceed()
    stream = HandleStream(77)
    with hooks.subscribe(launch=around):
        assert launch(stream) == "done"
    assert launch(stream) == "done"                      # closed: numba-cuda's own call again
    assert ran == [(1, 2), (1, 2)]
    assert seen == [(kernel, "busy_kernel", (1, 2), (3, 1, 1), (64, 1, 1), stream, 128, False, False,
                     ("busy_kernel", stream, ((3, 1, 1), (64, 1, 1)), False))]


def test_nested_subscribers_each_see_a_launch_once_the_first_opened_outermost(gpu_launch_hook):
    launch, ran, _ = gpu_launch_hook
    order = []

    def named(name):
        def around(proceed, k):
            order.append(f"{name} in")
            result = proceed()
            order.append(f"{name} out")
            return result
        return around
    with hooks.subscribe(launch=named("outer")):
        with hooks.subscribe(launch=named("inner")):
            launch(HandleStream(5))
        launch(HandleStream(5))                           # one again: the short way
    assert order == ["outer in", "inner in", "inner out", "outer out", "outer in", "outer out"]
    assert len(ran) == 2


def test_a_launch_made_by_the_subscriber_itself_passes_it_by(gpu_launch_hook):
    launch, ran, _ = gpu_launch_hook
    calls = []

    def around(proceed, k):
        calls.append(k.args)
        if k.args == (1, 2):
            launch(HandleStream(5), args=("inner",))      # the subscriber launches: not handed back
        return proceed()
    with hooks.subscribe(launch=around):
        launch(HandleStream(5))
    assert calls == [(1, 2)] and ran == [("inner",), (1, 2)]


def test_the_timeline_notes_each_launch_from_plain_values(gpu_launch_hook):
    """Rows by first use (a handle is a stream's identity, the object is not kept), labels and
    launch shapes as the trace is read; 0 is the default stream."""
    launch, _, _ = gpu_launch_hook
    tl = timeline.Timeline(timed=())
    tl.timed = False                                      # no GPU here: nothing to time
    with tl:
        launch(HandleStream(900))
        launch(HandleStream(901), grid=(7, 2, 1))
        launch(HandleStream(900))                         # a new object, the same stream
        launch(0)
    assert [(op.kind, op.label, op.row, op.grid) for op in tl.trace] == [
        ("kernel", "busy_kernel", "stream 1", (3, 1, 1)), ("kernel", "busy_kernel", "stream 2", (7, 2, 1)),
        ("kernel", "busy_kernel", "stream 1", (3, 1, 1)), ("kernel", "busy_kernel", "default stream", (3, 1, 1))]
    assert [op.index for op in tl.trace] == [0, 1, 2, 3]
    kept = [entry for entry in tl._submitted if any(isinstance(v, HandleStream) for v in entry)]
    assert kept == []                                      # no stream object held by the trace


def test_a_stream_named_after_ops_on_others_keeps_their_rows_in_order(gpu_launch_hook):
    launch, _, _ = gpu_launch_hook
    tl = timeline.Timeline(timed=())
    tl.timed = False
    with tl:
        launch(HandleStream(1000))
        tl.name(HandleStream(2000), "copies")
        launch(HandleStream(2000))
    assert [op.row for op in tl.trace] == ["stream 1", "copies"]



def test_a_bracket_runs_before_and_after_the_launch_and_no_after_when_it_raises(gpu_launch_hook, monkeypatch):
    """The recorder's kind of handler: before gets what KernelLaunch.recorded gives and returns a
    token, after gets the token once the launch has returned, and not when it raised."""
    launch, ran, _ = gpu_launch_hook
    from numba.cuda.dispatcher import CUDADispatcher

    def numba_launch(dispatcher, args, config):          # what the hook wraps when it installs
        if args == ("raise",):
            raise ZeroDivisionError("numba-cuda refused the launch")
        ran.append(args)
    monkeypatch.setattr(CUDADispatcher, "call", numba_launch, raising=False)
    order = []

    def before(name, stream, dims, captured):
        order.append(("before", name, stream.handle, dims, captured, len(ran)))
        return stream.handle
    with hooks.subscribe(launch=hooks.Bracket(before, lambda token: order.append(("after", token, len(ran))))):
        launch(HandleStream(3))
        with pytest.raises(ZeroDivisionError):
            launch(HandleStream(9), args=("raise",))
        launch(HandleStream(4))
    shape = ((3, 1, 1), (64, 1, 1))
    assert order == [("before", "busy_kernel", 3, shape, False, 0), ("after", 3, 1),
                     ("before", "busy_kernel", 9, shape, False, 1),                 # raised: no after
                     ("before", "busy_kernel", 4, shape, False, 1), ("after", 4, 2)]


def test_a_bracket_among_other_subscriptions_sees_the_launch_around_the_inner_ones(gpu_launch_hook):
    launch, ran, _ = gpu_launch_hook
    order = []

    def inner(proceed, k):
        order.append("inner")
        return proceed()
    with hooks.subscribe(launch=hooks.Bracket(lambda *noted: order.append(("before", noted[0])),
                                              lambda token: order.append("after"))):
        with hooks.subscribe(launch=inner):
            launch(HandleStream(5))
    assert order == [("before", "busy_kernel"), "inner", "after"] and len(ran) == 1


def test_a_makespan_records_one_start_event_an_end_per_stream_and_none_per_op(monkeypatch):
    """Makespan's bookkeeping with a fake driver: a start event at the block's first op only (none on
    another stream's first op, which may be idle while the block's copies run), an end event on a
    stream when the host synchronizes it (again only if it got ops since) or when the block ends;
    the makespan is the last end minus the start."""
    import contextlib
    import itertools
    clock, handles, times, recorded = itertools.count(), itertools.count(100), {}, []

    def record(handle, key):
        times[handle] = next(clock)
        recorded.append(key)
        return 0
    fake_cuda = types.SimpleNamespace(event=lambda timing: types.SimpleNamespace(handle=next(handles)),
                                      synchronize=lambda: None,
                                      event_elapsed_time=lambda a, b: times[b.handle] - times[a.handle])
    monkeypatch.setattr(timeline, "_event_recorder", lambda: record)
    monkeypatch.setattr(timeline, "_spare_events", [])
    monkeypatch.setattr(device, "is_simulator", lambda: False)
    monkeypatch.setattr(device, "cuda", lambda: fake_cuda)
    monkeypatch.setattr(timeline.hooks, "subscribe", lambda **handlers: contextlib.nullcontext())
    with timeline.Makespan() as window:
        handlers = window._handlers()
        handlers[hooks.LAUNCH].before("busy_kernel", 11, ((1, 1, 1), (32, 1, 1)), False)
        handlers["copy_to_device"].before("h2d", 4, 11)                  # a second op: no event
        handlers["copy_to_host"].before("d2h", 4, 22)
        handlers["stream_synchronize"](lambda: None, 11)
        handlers["stream_synchronize"](lambda: None, 11)                   # nothing since: no event
        handlers[hooks.LAUNCH].before("busy_kernel", 33, ((1, 1, 1), (32, 1, 1)), True)   # captured
    assert recorded == [11, 11, 22] and window.streams == 2
    assert window.makespan_ms == 2                                         # stream 22's end - the start


def fake_event_driver(monkeypatch):
    """A fake driver for the Makespan: each event record takes the next tick of a clock; returns the
    list of the stream keys recorded on."""
    import itertools
    clock, handles, times, recorded = itertools.count(), itertools.count(100), {}, []

    def record(handle, key):
        times[handle] = next(clock)
        recorded.append(key)
        return 0
    fake_cuda = types.SimpleNamespace(event=lambda timing: types.SimpleNamespace(handle=next(handles)),
                                      synchronize=lambda: None,
                                      event_elapsed_time=lambda a, b: times[b.handle] - times[a.handle])
    monkeypatch.setattr(timeline, "_event_recorder", lambda: record)
    monkeypatch.setattr(timeline, "_spare_events", [])
    monkeypatch.setattr(device, "cuda", lambda: fake_cuda)
    return recorded


def test_a_makespan_on_declared_streams_watches_only_the_first_op(gpu_launch_hook, monkeypatch):
    """Makespan(streams=...): the first launch records the start and closes the watch on launches,
    so numba-cuda's own launch is back for every launch after it (nothing of kernellab's on their
    path); each declared stream gets its end as the block ends."""
    from numba.cuda.dispatcher import CUDADispatcher
    launch, ran, _ = gpu_launch_hook
    recorded = fake_event_driver(monkeypatch)
    a, b = HandleStream(11), HandleStream(22)
    bare = CUDADispatcher.call
    with timeline.Makespan(streams=(a, b)) as window:
        launch(a)
        assert CUDADispatcher.call is bare                   # the watch closed after the first op
        launch(b)
        launch(a)
    assert len(ran) == 3 and recorded[0] == 11 and sorted(recorded[1:]) == [11, 22]
    assert window.makespan_ms == 2 and window.streams == 2


def test_a_makespan_says_when_its_first_op_ran_outside_the_declared_streams(gpu_launch_hook, monkeypatch):
    launch, _, _ = gpu_launch_hook
    fake_event_driver(monkeypatch)
    with pytest.raises(ValueError, match="not one of the streams given"):
        with timeline.Makespan(streams=(HandleStream(11),)):
            launch(HandleStream(33))


def fake_timed_driver(monkeypatch):
    """A fake driver and host clock for a timed Timeline: an event records the fake GPU clock
    `now["gpu"]`, the host clock reads `now["host"]`; returns (now, the stream keys recorded on, in
    order, and op(timeline, name, stream, submitted_ms, returned_ms, start_ms, end_ms), which runs a
    launch through the timeline's Bracket with the clocks set: the host at submission and return,
    the GPU at the op's start and end (None: no start event expected there))."""
    import contextlib
    now, handles, times, recorded = {"host": 0.0, "gpu": 0.0}, iter(range(100, 200)), {}, []

    def record(handle, key):
        assert now["gpu"] is not None, "an event recorded where the op expected none"
        times[handle] = now["gpu"]
        recorded.append(key)
        return 0

    def new_event(timing):
        event = types.SimpleNamespace(handle=next(handles))
        event.record = lambda stream: record(event.handle, 0)
        return event
    fake_cuda = types.SimpleNamespace(event=new_event, synchronize=lambda: None, stream=lambda: 0,
                                      event_elapsed_time=lambda a, b: times[b.handle] - times[a.handle])
    monkeypatch.setattr(timeline, "time", types.SimpleNamespace(perf_counter=lambda: now["host"]))
    monkeypatch.setattr(timeline, "_event_recorder", lambda: record)
    monkeypatch.setattr(timeline, "_spare_events", [])
    monkeypatch.setattr(device, "is_simulator", lambda: False)
    monkeypatch.setattr(device, "cuda", lambda: fake_cuda)
    monkeypatch.setattr(timeline.hooks, "subscribe", lambda **handlers: contextlib.nullcontext())
    monkeypatch.setattr(timeline.hooks, "launches_replaced", lambda: False)

    def op(tl, name, stream, submitted_ms, returned_ms, start_ms, end_ms, kind=hooks.LAUNCH, captured=False):
        handler = tl._handlers()[kind]
        now["host"], now["gpu"] = submitted_ms / 1e3, start_ms
        if kind == hooks.LAUNCH:
            token = handler.before(name, stream, ((1, 1, 1), (32, 1, 1)), captured)
        else:                                    # a copy, described (hooks.described_copy)
            token = handler.before("h2d", 4, stream)
        now["host"], now["gpu"] = returned_ms / 1e3, end_ms
        handler.after(token)
    return now, recorded, op


def test_an_inferred_start_is_the_op_befores_end_and_uncertain_where_the_stream_may_have_idled(monkeypatch):
    """Timeline(infer_starts=True) with a fake driver and a fake host clock: an op after a timed op
    on its stream, nothing between them, gets no start event and starts at that op's end; if that
    end came before the host had finished submitting it (the host's clock read against the origin
    event), the start is counted uncertain, bounded by that gap. An event wait, a synchronize or
    default-stream work between them, or no op before, means a start event of its own; an event
    record (even on the default stream) does not. A stream opened with the timeline (`streams`)
    starts its first op from its opening event."""
    now, recorded, run = fake_timed_driver(monkeypatch)
    with timeline.Timeline(source="fake", infer_starts=True) as tl:     # origin: host 0, GPU 0
        def op(*what):
            run(tl, *what)
        op("a", 11, 0.0, 0.1, 0.1, 0.5)          # nothing before it: its own start event
        op("b", 11, 0.2, 0.3, None, 0.9)         # in before a ended (0.5): starts at a's end, for sure
        tl._handlers()["event_wait"](lambda: None, object(), 11)
        op("c", 11, 0.4, 0.5, 0.95, 1.2)         # a wait between: its own start event
        op("e", 0, 0.6, 0.7, 1.3, 1.5)           # the default stream: its own...
        op("f", 11, 0.8, 0.9, 1.6, 2.0)          # ...and f after it, on 11
        op("g", 11, 2.2, 2.5, None, 3.0)         # in at 2.5, after f ended (2.0): uncertain by 0.5 ms
        tl._handlers()["synchronize"](lambda: None)
        op("h", 11, 3.1, 3.2, 3.3, 3.4)          # after a device-wide synchronize: its own start event
    spans = {s.label: s for s in tl.data.spans}
    assert spans["b"].start_ms == spans["a"].end_ms                  # sure: the op before's end
    assert spans["g"].start_ms == pytest.approx(spans["f"].end_ms + 0.5)   # in at 2.5: may be back to f's end
    assert spans["c"].start_ms == 0.95 - 0.1                       # from the first span's start
    assert spans["h"].start_ms == 3.3 - 0.1
    assert spans["g"].start_uncertain_ms == pytest.approx(0.5) and spans["b"].start_uncertain_ms is None
    assert len(recorded) == 1 + 2 * 5 + 2   # origin; 5 own starts; b, g
    assert tl.start_sources() == {"own_event": 5, "inferred": 1, "uncertain": 1,
                                  "uncertain_max_us": pytest.approx(500.0)}
    assert "one before it only where no timed op came just before it" in tl.events
    assert "a pair of CUDA events" in timeline.Timeline().events
    with pytest.raises(ValueError, match="give it with infer_starts=True"):
        timeline.Timeline(streams=(11,))
    with pytest.raises(ValueError, match="not the default stream"):
        timeline.Timeline(infer_starts=True, streams=(11, 0))
    now["host"], now["gpu"] = 4.0, 4.0
    del recorded[:]
    with timeline.Timeline(source="fake", infer_starts=True, streams=(11, 22)) as opened:   # at GPU 4.0
        def op(*what):
            run(opened, *what)
        opened._handlers()["event_record"](lambda: None, object(), 0)   # holds nothing back
        op("i", 22, 4000.1, 4000.2, None, 4.5)   # in at 0.2 ms after 22's opening: uncertain by 0.2
        op("j", 11, 4000.3, 4000.4, None, 4.9)   # in at 0.4 ms: uncertain by 0.4
        op("k", 11, 4000.5, 4000.6, None, 5.2)   # in before j ended (4.9): j's end, for sure
        op("l", 0, 4000.7, 4000.8, 5.3, 5.6)     # the default stream: its own start event
    spans = {s.label: s for s in opened.data.spans}
    assert spans["i"].start_ms == 0.0 and spans["j"].start_ms == pytest.approx(0.2)   # submitted at 0.2, 0.4
    assert spans["k"].start_ms == spans["j"].end_ms
    assert spans["i"].start_uncertain_ms == pytest.approx(0.2) and spans["j"].start_uncertain_ms == pytest.approx(0.4)
    assert recorded == [0, 11, 22, 22, 11, 11, 0, 0]      # origin, the openings, no start event for i, j, k
    assert opened.start_sources() == {"own_event": 1, "inferred": 1, "uncertain": 2,
                                      "uncertain_max_us": pytest.approx(400.0)}
    assert "one on each of the 2 stream(s) given" in opened.events


def test_an_op_the_timeline_does_not_time_gives_the_next_op_on_its_stream_a_start_event(monkeypatch):
    """With only kernels timed, a copy between two kernels on one stream is in the trace, untimed, and
    the kernel after it gets a start event of its own (the copy ran between the two); a captured
    launch does the same. Only a kernel right after a timed kernel starts at that kernel's end."""
    now, recorded, op = fake_timed_driver(monkeypatch)
    with timeline.Timeline(source="fake", infer_starts=True, timed=("kernel",)) as tl:
        op(tl, "a", 11, 0.0, 0.1, 0.1, 0.5)
        op(tl, "copy", 11, 0.2, 0.3, None, None, kind="copy_to_device")     # untimed: no event
        op(tl, "b", 11, 0.4, 0.5, 0.9, 1.2)                                 # its own start event
        op(tl, "c", 11, 0.6, 0.7, None, 1.5)                                # after b: b's end
        op(tl, "captured", 11, 0.8, 0.9, None, None, captured=True)         # not run: no event
        op(tl, "d", 11, 1.0, 1.1, 1.6, 1.9)                                 # its own start event
    spans = {s.label: s for s in tl.data.spans}
    assert sorted(spans) == ["a", "b", "c", "d"] and len(tl.trace) == 6
    assert spans["b"].start_ms == pytest.approx(0.8) and spans["d"].start_ms == pytest.approx(1.5)
    assert spans["c"].start_ms == spans["b"].end_ms
    assert recorded == [0] + [11] * 7          # the origin; a, b, d: two each; c: its end only
    assert tl.start_sources()["own_event"] == 3 and tl.start_sources()["inferred"] == 1


def test_the_compiled_recorder_calls_the_driver_by_its_address_and_reads_perf_counters_clock(hot_path):
    """The compiled hot path's own two parts, which the fake driver above stands in for: the driver's
    cuEventRecord called by its address (a ctypes function here), and the host clock read as
    time.perf_counter reads it; a driver error is one line naming the stream."""
    if hot_path == "python":
        pytest.skip("the compiled recorder's own parts")
    import ctypes
    import time
    calls = []

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    def driver(event, stream):
        calls.append((event, stream))
        return 700 if stream == 99 else 0
    address = timeline._driver_address(driver)
    assert address == ctypes.cast(driver, ctypes.c_void_p).value
    submitted, ready, ends, own_starts, returned, keys = [], {}, {}, {}, {}, timeline._StreamKeys()
    spare = [(object(), 501), (object(), 502)]
    recorder = hooks.hot_path().Recorder(submitted, keys, keys.remember, ready, timeline._SPECIAL_ROWS,
                                         ("kernel",), spare, lambda: (object(), 600), ends, own_starts,
                                         returned, address, True)
    before = time.perf_counter()
    index = recorder.start("kernel", "busy_kernel", 11, ((1, 1, 1), (32, 1, 1)))
    recorder.end(index)
    after = time.perf_counter()
    assert submitted == [] and ends == {}          # held in C until flushed
    recorder.flush()
    assert calls == [(502, 11), (501, 11)] and spare == []       # the pool's last event first
    assert before <= submitted[0][3] <= returned[0] <= after
    assert ready == {11: True} and list(ends) == [0] and list(own_starts) == [0]
    with pytest.raises(RuntimeError, match=r"cuEventRecord failed \(CUresult 700\) on stream handle 99$"):
        recorder.start("kernel", "busy_kernel", 99)               # a new event from new_event: 600
    assert calls[-1] == (600, 99)


def test_the_compiled_floor_records_by_address_and_its_bracket_does_nothing(hot_path, monkeypatch):
    """bench 07's floor of a recorder with an event per op: `_hotpath.record` calls the driver by its
    address and returns its CUresult; `events_around(compiled=True)` records the same two events of
    its own around every call (one after it, with before=False); `noop` takes anything, returns None."""
    if hot_path == "python":
        pytest.skip("the compiled floor's own parts")
    import ctypes
    calls = []

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    def driver(event, stream):
        calls.append((event, stream))
        return 0 if stream else 700
    compiled = hooks.hot_path()
    address = timeline._driver_address(driver)
    assert compiled.record(address, 5, 7) == 0 and compiled.record(address, 5, 0) == 700
    assert calls == [(5, 7), (5, None)]            # ctypes gives a null pointer as None
    with pytest.raises(ValueError, match="a null driver address"):
        compiled.record(0, 5, 7)
    assert compiled.noop("kernel", 11, dims=None) is None
    made = iter(range(801, 805))
    monkeypatch.setattr(timeline, "_new_event", lambda cuda: (object(), next(made)))
    monkeypatch.setattr(timeline, "_event_recorder", lambda: driver)
    ran = []
    calls.clear()
    for before in (True, False):
        way = timeline.events_around(lambda: ran.append(len(calls)), 13, before=before, compiled=True)
        way()
        way()
        assert len(way.events) == 2
    assert calls == [(801, 13), (802, 13), (801, 13), (802, 13), (804, 13), (804, 13)]
    assert ran == [1, 3, 4, 5]


def test_the_compiled_copy_hook_hands_other_calls_to_the_python_hook(hot_path, monkeypatch):
    """A copy its Bracket takes ((self, ary, stream), stream by name too) runs in the compiled hook;
    anything else (another keyword, copy_to_device with no ary) goes to the Python hook, as before."""
    if hot_path == "python":
        pytest.skip("the compiled hook's own dispatch")
    seen, fell_back = [], []

    def original(self, ary=None, stream=0, **named):
        return ("copied", ary, stream, named)

    def python_hook(*args, **kwargs):
        fell_back.append((args, kwargs))
        return original(*args, **kwargs)
    hook = hooks.hot_path().CopyHook(original, python_hook, True, None)
    owner = type("Array", (), {"copy_to_host": hook, "nbytes": 64, "stream": 5})
    array = owner()
    assert owner.copy_to_host is hook and array.copy_to_host(1) == ("copied", 1, 0, {})   # no sole: Python
    hook.sole = (types.SimpleNamespace(busy=False), lambda *described: seen.append(described) or "token",
                 lambda token: seen.append(token))
    assert array.copy_to_host(2, stream=7) == ("copied", 2, 7, {})
    assert array.copy_to_host() == ("copied", None, 0, {})
    assert seen == [("d2h", 64, 7), "token", ("d2h", 64, 5), "token"]   # no stream given: the array's
    array.copy_to_host(3, 4, extra=1)
    assert len(fell_back) == 2 and fell_back[-1] == ((array, 3, 4), {"extra": 1})
    hook.sole = (types.SimpleNamespace(busy=True), None, None)          # busy: passed by
    assert array.copy_to_host(8) == ("copied", 8, 0, {}) and len(seen) == 4
    with pytest.raises(TypeError, match="sole"):
        hook.sole = ("not", "three")



def test_a_timelines_record_says_which_hot_path_it_ran(hot_path):
    assert ("hot path compiled" in timeline.Timeline().events) == (hot_path == "compiled")


def test_the_compiled_hot_path_keeps_no_reference_it_does_not_own(hot_path):
    """Reference counts of what passes through the compiled hooks and halves are where they were
    after many calls, a raising launch included (which leaves its busy flag clear): a leaked
    reference per op would grow a long pipeline's memory with every op it records."""
    if hot_path == "python":
        pytest.skip("the compiled hot path's own references")
    import functools
    import gc
    import sys
    import threading
    compiled, token, stream = hooks.hot_path(), object(), HandleStream(5)

    class Flag(threading.local):
        busy = False
    flag, host = Flag(), types.SimpleNamespace(nbytes=1024)
    sole = (flag, lambda *described: token, lambda t: None)
    copy = compiled.CopyHook(lambda self, ary=None, stream=0: None, None, False, hooks._REQUIRED)
    launch = compiled.LaunchHook(lambda *call: None, None)

    def refuse(*call):
        raise ZeroDivisionError("numba-cuda refused the launch")
    refused = compiled.LaunchHook(refuse, None)
    copy.sole = launch.sole = refused.sole = sole
    array = type("Array", (), {"copy_to_device": copy, "nbytes": 64, "stream": stream})()
    dispatcher = types.SimpleNamespace(py_func=types.SimpleNamespace(__name__="busy_kernel"))
    config = types.SimpleNamespace(stream=stream, griddim=(1, 1, 1), blockdim=(32, 1, 1))
    keys = timeline._StreamKeys()
    submitted, ends, own_starts, returned, ready = [], {}, {}, {}, {}
    events = [(object(), handle) for handle in range(1, 3001)]
    spare = list(events)
    recorder = compiled.Recorder(submitted, keys, keys.remember, ready, timeline._SPECIAL_ROWS, ("h2d",), spare,
                                 lambda: (object(), 9), ends, own_starts, returned, lambda handle, key: 0, True)
    note = compiled.Noter([], keys, keys.remember).note
    handle, nbytes = 10**12 + 11, 10**12 + 4       # ints no cache holds: their counts are theirs alone
    note("kernel", "busy_kernel", stream)        # the stream keys keep the stream from here on, by design
    recorder.start("kernel", "busy_kernel", handle)   # (and the handle's key): not timed, noted
    recorder.flush()
    submitted.clear()
    watched = [host, stream, token, array, flag, dispatcher, config, events[0], events[-1], handle, nbytes]
    gc.collect()
    counts = [sys.getrefcount(o) for o in watched]
    for _ in range(3000):
        array.copy_to_device(host, stream=stream)
        array.copy_to_device(host)
        launch(dispatcher, (1, 2), config)
        with pytest.raises(ZeroDivisionError):
            refused(dispatcher, (1, 2), config)
        recorder.end(recorder.start("h2d", nbytes, handle))
        note("kernel", "busy_kernel", stream)
    assert flag.busy is False
    busy = compiled.BusyFlag()            # and with the halves a compiled Timeline's, called directly
    copy.sole = (busy, recorder.start, recorder.end)
    launch.sole = refused.sole = (busy, functools.partial(recorder.start, "h2d"), recorder.end)
    assert copy.fast is recorder and launch.fast is recorder
    for _ in range(1000):
        array.copy_to_device(host, stream=stream)
        launch(dispatcher, (1, 2), config)
        with pytest.raises(ZeroDivisionError):
            refused(dispatcher, (1, 2), config)
    copy.sole = (busy, note, None)
    for _ in range(1000):
        array.copy_to_device(host)
    assert busy.busy is False
    copy.sole = launch.sole = refused.sole = None
    recorder.start("kernel", "busy_kernel", handle)   # its last stream the handle again, as counted
    recorder.flush()                                   # what it held handed over
    for held in (submitted, ends, own_starts, returned, ready):
        held.clear()
    spare[:] = events                           # as a closing timeline gives its events back
    gc.collect()
    assert [sys.getrefcount(o) for o in watched] == counts


def test_the_compiled_hot_path_gives_streams_in_turn_each_its_own_key(hot_path):
    """The compiled noter and recorder remember the last stream's key (a pipeline submits runs on
    one stream): streams taken in turn, a new object for a known stream, and the default stream
    each still get their own row's key."""
    if hot_path == "python":
        pytest.skip("the compiled hot path's key cache")
    compiled = hooks.hot_path()
    a, b = HandleStream(31), HandleStream(32)
    order = [a, b, a, a, b, HandleStream(31), 0, b, None, a]
    expected = [31, 32, 31, 31, 32, 31, 0, 32, 0, 31]
    keys, submitted = timeline._StreamKeys(), []
    note = compiled.Noter(submitted, keys, keys.remember).note
    for stream in order:
        note("kernel", "busy_kernel", stream)
    assert [entry[2] for entry in submitted] == expected
    keys, submitted, ends = timeline._StreamKeys(), [], {}
    spare = [(object(), handle) for handle in range(1, 2 * len(order) + 1)]
    recorder = compiled.Recorder(submitted, keys, keys.remember, {}, timeline._SPECIAL_ROWS, ("h2d",), spare,
                                 lambda: (object(), 9), ends, {}, {}, lambda handle, key: 0, False)
    for stream in order:
        recorder.end(recorder.start("h2d", 64, stream))
    recorder.flush()
    assert [entry[2] for entry in submitted] == expected


def test_the_compiled_hooks_call_a_compiled_timelines_halves_directly(hot_path):
    """Where the sole Bracket is a compiled Recorder's start and end (a launch's start bound to its
    kind by functools.partial) or a Noter's note, the compiled hook calls them in C: the same entries
    as through the methods, no end for a call that raised, the busy flag clear after it. Any other
    Bracket (a launch's start with no kind bound, a copy's with one, more bound, another after) is
    called as given."""
    if hot_path == "python":
        pytest.skip("the compiled hooks' direct calls")
    import functools
    import threading
    compiled, stream = hooks.hot_path(), HandleStream(21)
    keys, submitted, ends, own_starts, returned, ready = timeline._StreamKeys(), [], {}, {}, {}, {}
    recorded = []
    spare = [(object(), handle) for handle in range(1, 9)]
    recorder = compiled.Recorder(submitted, keys, keys.remember, ready, timeline._SPECIAL_ROWS, ("h2d", "kernel"),
                                 spare, lambda: (object(), 99), ends, own_starts, returned,
                                 lambda handle, key: recorded.append((handle, key)) or 0, True)
    noted = []
    noter = compiled.Noter(noted, keys, keys.remember)
    flag = compiled.BusyFlag()

    def refuse(*call):
        raise ZeroDivisionError("numba-cuda refused the launch")
    copy = compiled.CopyHook(lambda self, ary, stream=0: "copied", None, False, hooks._REQUIRED)
    launch = compiled.LaunchHook(lambda *call: "launched", None)
    refused = compiled.LaunchHook(refuse, None)
    kernel_start = functools.partial(recorder.start, "kernel")
    copy.sole = (flag, recorder.start, recorder.end)
    launch.sole = refused.sole = (flag, kernel_start, recorder.end)
    assert copy.fast is recorder and launch.fast is recorder
    array = type("Array", (), {"copy_to_device": copy, "nbytes": 64, "stream": stream})()
    dispatcher = types.SimpleNamespace(py_func=types.SimpleNamespace(__name__="busy_kernel"))
    config = types.SimpleNamespace(stream=stream, griddim=(1, 1, 1), blockdim=(32, 1, 1))
    host = types.SimpleNamespace(nbytes=1024)
    assert array.copy_to_device(host, stream=stream) == "copied"
    assert launch(dispatcher, (), config) == "launched"
    with pytest.raises(ZeroDivisionError):
        refused(dispatcher, (), config)
    assert flag.busy is False
    recorder.flush()
    assert [entry[:3] + entry[4:] for entry in submitted] == [
        ("h2d", 1024, 21, None), ("kernel", "busy_kernel", 21, ((1, 1, 1), (32, 1, 1))),
        ("kernel", "busy_kernel", 21, ((1, 1, 1), (32, 1, 1)))]
    assert list(own_starts) == [0] and list(ends) == [0, 1] and list(returned) == [0, 1]   # raised: no end
    assert [key for _, key in recorded] == [21, 21, 21]
    copy.sole = (flag, noter.note, None)
    launch.sole = (flag, functools.partial(noter.note, "kernel"), None)
    assert copy.fast is noter and launch.fast is noter
    array.copy_to_device(host)
    launch(dispatcher, (), config)
    assert [entry[:3] for entry in noted] == [("h2d", 1024, 21), ("kernel", "busy_kernel", 21)]
    for sole, hook in [((flag, recorder.start, recorder.end), launch),                 # a launch's kind not bound
                       ((flag, kernel_start, recorder.end), copy),                      # a copy's kind bound
                       ((flag, functools.partial(recorder.start, "kernel", "more"), recorder.end), launch),
                       ((flag, functools.partial(recorder.start, "kernel", stream=1), recorder.end), launch),
                       ((flag, recorder.start, noter.note), copy), ((flag, noter.note, recorder.end), copy),
                       ((flag, lambda *described: None, None), copy)]:
        hook.sole = sole
        assert hook.fast is None, sole
    hook.sole = None
    assert hook.fast is None
    flag.busy = True                              # set on this thread only
    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(flag.busy))
    thread.start()
    thread.join()
    assert flag.busy is True and elsewhere == [False]
    flag.busy = False
    assert flag.busy is False


def test_the_compiled_recorder_hands_its_ops_over_in_order_when_flushed(hot_path):
    """The compiled recorder holds the ops it notes until flush() hands them to the containers, in
    order, each with its index: an op ended after a flush gets its end event all the same, and an op
    noted by Python in between (Timeline._note flushes first) keeps its place."""
    if hot_path == "python":
        pytest.skip("the compiled recorder's log")
    compiled, keys = hooks.hot_path(), timeline._StreamKeys()
    submitted, ends, own_starts, returned, ready = [], {}, {}, {}, {}
    spare = [(object(), handle) for handle in range(1, 9)]
    recorder = compiled.Recorder(submitted, keys, keys.remember, ready, timeline._SPECIAL_ROWS, ("h2d",), spare,
                                 lambda: (object(), 99), ends, own_starts, returned, lambda handle, key: 0, True)
    first = recorder.start("h2d", 64, 11)
    recorder.end(first)
    second = recorder.start("h2d", 128, 11)
    recorder.flush()
    submitted.append(("wait", "event wait", 11, 0.0, None))    # as Timeline._note appends, after a flush
    recorder.end(second)                                        # ended after the flush
    third = recorder.start("h2d", 256, 11)
    recorder.end(third)
    recorder.flush()
    assert (first, second, third) == (0, 1, 3)
    assert [entry[:3] for entry in submitted] == [("h2d", 64, 11), ("h2d", 128, 11), ("wait", "event wait", 11),
                                                  ("h2d", 256, 11)]
    assert sorted(ends) == [0, 1, 3] and sorted(returned) == [0, 1, 3] and list(own_starts) == [0]
    assert all(isinstance(submitted[i][3], float) and submitted[i][3] <= returned[i] for i in (0, 1, 3))
    recorder.flush()                                            # nothing held: nothing more
    assert len(submitted) == 4

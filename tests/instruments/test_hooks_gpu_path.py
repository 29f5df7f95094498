"""The GPU's launch hook, run here without a GPU: numba-cuda's CUDADispatcher.call replaced by a
function that only counts, and the hooks told they are on a GPU while they install. This is the
recorder's per-op path (kernellab bench 07 times it on the H200); here it is checked for what it
hands the subscribers and what a Timeline notes from it."""

import types

import pytest

import kernellab  # noqa: F401
from kernellab.gpu import device, hooks, timeline

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


def test_streams_in_turn_each_get_their_own_key():
    """The recorder looks a stream's key up by the stream object's id: streams taken in turn, a new
    object for a known stream's handle, the default stream (0 or None) and an unhashable stream each
    get their own row's key, timed or trace-only."""
    class Unhashable(HandleStream):
        __hash__ = None
    a, b = HandleStream(31), HandleStream(32)
    order = [a, b, a, a, b, HandleStream(31), 0, b, None, Unhashable(33), a]
    expected = [31, 32, 31, 31, 32, 31, 0, 32, 0, 33, 31]
    tl = timeline.Timeline()
    note = tl._noting()
    for stream in order:
        note("kernel", "busy_kernel", stream)
    assert [entry[2] for entry in tl._submitted] == expected

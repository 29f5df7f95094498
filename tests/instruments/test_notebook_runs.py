"""Headless notebook runs (kernellab.course.notebooks): nbclient's wait for a cell's reply."""

import asyncio
import time

import zmq

from kernellab.course import notebooks

REPLY_TIMEOUT_S = 10     # nbclient's poll for the reply; it stands for the cell timeout (300 s)


async def reply_after_a_send_during_the_wait(manager_class) -> tuple[str, float]:
    """The explorer cell of notebook 06, reduced to its messages: nbclient sends the cell, waits
    for its reply on the shell channel, the reply comes in, and then nbclient's stand-in for the
    cell's Output widget sends an update on that channel. Returns (the message read, seconds
    from that send to the read)."""
    kernel = zmq.Context.instance().socket(zmq.ROUTER)           # the kernel's end of the channel
    port = kernel.bind_to_random_port("tcp://127.0.0.1")
    manager = manager_class(ip="127.0.0.1", shell_port=port)
    client = manager.client()
    shell, session = client.shell_channel, manager.session
    try:
        shell.send(session.msg("execute_request", {"code": "explorer()"}))
        ident, *_ = kernel.recv_multipart()
        waiting = asyncio.ensure_future(shell.get_msg(timeout=REPLY_TIMEOUT_S))
        await asyncio.sleep(0.05)                                 # the poll waits on the socket
        session.send(kernel, "execute_reply", {"status": "ok"}, ident=ident)
        time.sleep(0.05)                                          # the reply is in, unread
        shell.send(session.msg("comm_msg", {"data": {"method": "update"}}))
        sent = time.perf_counter()
        reply = await waiting
        return reply["msg_type"], time.perf_counter() - sent
    finally:
        client.stop_channels()
        kernel.close(linger=0)


def test_a_reply_in_before_a_send_on_the_shell_channel_is_read_at_once():
    """jupyter_client's plain channel reads it only when the poll times out (REPLY_TIMEOUT_S);
    notebook 06 waited the 300 s cell timeout so in some CI runs."""
    read, seconds = asyncio.run(reply_after_a_send_during_the_wait(notebooks.kernel_manager_class()))
    assert read == "execute_reply"
    assert seconds < 2, f"the reply was read {seconds:.1f} s after the send (poll timeout {REPLY_TIMEOUT_S} s)"

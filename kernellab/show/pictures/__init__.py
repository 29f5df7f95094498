"""Pictures of a kernel at work, drawn from plain data: `canvas` (the Picture, the palette, the
rules a picture keeps), `kernel` (threads, a warp's sectors, shared-memory banks, a tile walk, a
reduction tree) and `machine` (streams on engines, an SM's resources, bytes moved).

The data comes from `kernellab.course.pictures`, which traces the lab's own kernel and picks what
to show; notebooks import that module.
"""

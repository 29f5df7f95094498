"""kernellab: the shared instruments of a kernel lab for learning GPU performance with Numba.

Importing kernellab chooses the device mode (GPU or Numba's simulator) before `numba.cuda`
is first imported; see kernellab.gpu.device.
"""

from kernellab.gpu import device

__version__ = "0.1.0"

try:
    device.setup()
except (device.DeviceModeError, ValueError) as exc:  # a mode that cannot be honoured, or a bad
    import sys                                         # KERNELLAB_DEVICE: one line, the fix
    print(f"kernellab: {exc}", file=sys.stderr)
    raise SystemExit(2) from None

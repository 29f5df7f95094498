"""kernellab: the shared instruments of a kernel lab for learning GPU performance with Numba.

Importing kernellab chooses the device mode (GPU or Numba's simulator) before `numba.cuda`
is first imported; see kernellab.gpu.device. A lab imports kernellab through kernellab.lab,
the student API.
"""

import warnings

from kernellab.gpu import device as _device

__version__ = "0.1.0"

try:
    _device.setup()
except (_device.DeviceModeError, ValueError) as exc:  # a mode that cannot be honoured, or a bad
    import sys                                          # KERNELLAB_DEVICE: one line, the fix
    print(f"kernellab: {exc}", file=sys.stderr)
    raise SystemExit(2) from None


def __getattr__(name: str):
    """`kernellab.device`, the previous release's path of kernellab.gpu.device, still works for
    one release, with a DeprecationWarning (kernellab.lab's `moved` does the same for modules)."""
    if name == "device":
        warnings.warn("kernellab.device is the previous release's path and goes in the next one: "
                      "import is_simulator and device_facts from kernellab.lab (kernellab.lab is "
                      "the student API)", DeprecationWarning, stacklevel=2)
        return _device
    raise AttributeError(f"module 'kernellab' has no attribute {name!r}")

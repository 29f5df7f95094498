"""Lab 01's constants, shared by its declaration (lab01_launch_overhead) and its parts
(lab01_measure, lab01_figures, lab01_claims): here, the parts import them without importing the
declaration, which imports the parts."""

import numpy as np

from kernellab.gpu import device

KERNELS = 100                                  # kernels in a captured chain
COUNTS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
PROFILE_LAUNCHES = 2000
HOST_ARRAY_SIZES = (1, 1 << 10, 1 << 20)       # float32 elements
SCALE = np.float32(1.5)                        # float32, as the kernels declare (a Python float: float64)
ROWS = 4 if device.is_simulator() else 32
AROUND_ROW = 1 << 10                           # elements per row where the Python around a launch is timed
WRAPPER_TARGET = 0.05
INSTRUMENT_BUDGET_US = 5.0             # what an open instrument may add to a launch (issue 23)

"""The one compiled piece, the recorder's hot path (kernellab/gpu/_hotpath.c): optional, so an
install without a C compiler or Python's headers still works, on the Python versions beside it."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("kernellab.gpu._hotpath", ["kernellab/gpu/_hotpath.c"], optional=True,
                             extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"])])

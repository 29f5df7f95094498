"""Deprecated: the previous release's path of kernellab.gpu.graphs. Import capture, GraphCache and
CaptureError from kernellab.lab (the student API); this module goes in the next release."""

from kernellab import lab
from kernellab.gpu.graphs import CaptureError, CapturedGraph, GraphCache, capture  # noqa: F401

lab.moved(__name__, lab.MOVED[__name__])

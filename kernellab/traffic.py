"""Deprecated: the previous release's path of kernellab.gpu.traffic. Import Ledger from
kernellab.lab (the student API); this module goes in the next release."""

from kernellab import lab
from kernellab.gpu.traffic import ArrayTraffic, Ledger, LedgerEntry, TrafficCount, meter  # noqa: F401

lab.moved(__name__, lab.MOVED[__name__])

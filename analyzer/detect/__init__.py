"""Detectors the engine feeds line by line: tracebacks aside, metrics and silent failures, phases, throughput, stalls, the run verdict and Flight Recorder dumps."""

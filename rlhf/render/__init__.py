"""Rendering for human feedback: segment -> frames -> H.264 (``video``), and the background
process that keeps the next pairs' videos ready (``worker``)."""

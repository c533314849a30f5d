"""journal: durable, immutable-segment checkpoints of AI coding-agent state."""

__version__ = "0.1.0"

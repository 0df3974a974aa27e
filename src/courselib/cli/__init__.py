"""The ``courselib`` command: thin views over the model (no logic of their own)."""

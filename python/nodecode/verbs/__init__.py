"""The verbs a cell can call, one module per family (files, shell and grep,
context, recall), assembled into one table in ``table``; ``prompt`` describes
them to the model."""

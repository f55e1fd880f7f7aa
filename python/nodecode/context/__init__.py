"""The context: its model, the request builder, and (later) the file and its edits."""
